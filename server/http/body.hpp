// The request body: where it ends, as the head frames it. parse_request calls read_body once the
// head is complete; this is the one place that knows body framings.
//
// Today a body is framed by Content-Length only, and it stays in the connection's buffer:
// request::body views it there. A request with Transfer-Encoding is refused (411).
//
// How chunked bodies fit: body_framing gains the Transfer-Encoding codings (record_header in
// parser.cpp fills it); read_body decodes the chunks that have arrived into storage the request
// owns (request::body then views that storage, as request::path is owned in decoded form) and
// reports `incomplete` until the last chunk and the trailer section are in. Like the parser it
// is stateless: it decodes from the start of the body on every call, and the connection's
// worth_parsing() keeps that from happening for every few bytes that arrive. limits::max_body
// bounds the decoded size as it bounds Content-Length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/parser.hpp"
#include "http/request.hpp"

namespace spoold::http {

// What the head said about the body.
struct body_framing {
  bool has_content_length = false;
  std::uint64_t content_length = 0;
  bool has_transfer_encoding = false;
};

// The body of the request whose head ends at `head_end` in `buffer`. `complete` fills out.body
// and counts head and body in `consumed`; `incomplete` sets `needed` (the buffer length at which
// the request is whole) and `needs_continue`; `error` carries 411 or 413.
parse_result read_body(std::string_view buffer, std::size_t head_end, const body_framing& framing,
                       const limits& lim, request& out);

}  // namespace spoold::http
