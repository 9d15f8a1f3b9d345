#include "http/body.hpp"

namespace spoold::http {

parse_result read_body(std::string_view buffer, std::size_t head_end, const body_framing& framing,
                       const limits& lim, request& out) {
  if (framing.has_transfer_encoding) {
    return parse_failure(411, "Transfer-Encoding is not supported");
  }
  out.content_length = framing.content_length;
  if (out.content_length > lim.max_body) return parse_failure(413, "request body too large");

  const std::size_t body_have = buffer.size() - head_end;
  if (body_have < out.content_length) {
    parse_result r;
    r.needs_continue = out.expect_continue && body_have == 0;
    r.needed = head_end + static_cast<std::size_t>(out.content_length);
    return r;
  }
  out.body = buffer.substr(head_end, static_cast<std::size_t>(out.content_length));
  parse_result r;
  r.status = parse_status::complete;
  r.consumed = head_end + out.body.size();
  return r;
}

}  // namespace spoold::http
