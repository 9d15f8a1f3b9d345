// read_body: see body.hpp for the framings and their limits.
#include "http/body.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "http/syntax.hpp"

namespace spoold::http {

namespace {

// A chunk-size line (with its extensions) or a trailer line, without its line end.
constexpr std::size_t max_framing_line = 8 * 1024;
// Chunks of data in one body (the last, empty chunk apart). Each line that arrives may cause a
// decode from the start of the body; this bounds the work a client sending tiny chunks causes.
constexpr std::size_t max_chunks = 1024;

std::size_t saturating_add(std::size_t a, std::size_t b) noexcept {
  return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

parse_result wait_for(std::size_t needed, bool awaits_line) {
  parse_result r;
  r.needed = needed;
  r.awaits_line = awaits_line;
  return r;
}

void skip_spaces(std::string_view s, std::size_t& i) noexcept {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

// quoted-string (RFC 9110, 5.6.4) starting at the '"' at `i`; `i` ends after the closing '"'.
bool skip_quoted_string(std::string_view s, std::size_t& i) noexcept {
  for (++i; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"') {
      ++i;
      return true;
    }
    if (c == '\\') {
      if (++i == s.size()) return false;
      const auto escaped = static_cast<unsigned char>(s[i]);
      if (escaped != '\t' && (escaped < 0x20 || escaped == 0x7f)) return false;
    } else if (c != '\t' && (c < 0x20 || c == 0x7f)) {
      return false;
    }
  }
  return false;
}

// chunk-size [ chunk-ext ] (RFC 9112, 7.1): 1*HEXDIG, then any number of
// BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ]. The extensions are only checked.
// nullptr when well formed, else why not.
const char* parse_chunk_size_line(std::string_view line, std::uint64_t& size) noexcept {
  std::size_t i = 0;
  size = 0;
  for (; i < line.size() && syntax::is_hex_digit(line[i]); ++i) {
    if (size > (UINT64_MAX >> 4)) return "chunk size too large";
    const char c = line[i];
    const int digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    size = size * 16 + static_cast<std::uint64_t>(digit);
  }
  if (i == 0) return "malformed chunk size";
  for (;;) {
    skip_spaces(line, i);
    if (i == line.size()) return nullptr;
    if (line[i] != ';') return "malformed chunk size";
    ++i;
    skip_spaces(line, i);
    const std::size_t name_start = i;
    while (i < line.size() && syntax::has_class(line[i], syntax::token_char)) ++i;
    if (i == name_start) return "malformed chunk extension";
    skip_spaces(line, i);
    if (i == line.size() || line[i] != '=') continue;
    ++i;
    skip_spaces(line, i);
    if (i < line.size() && line[i] == '"') {
      if (!skip_quoted_string(line, i)) return "malformed chunk extension";
    } else {
      const std::size_t value_start = i;
      while (i < line.size() && syntax::has_class(line[i], syntax::token_char)) ++i;
      if (i == value_start) return "malformed chunk extension";
    }
  }
}

// The framing line from `pos` in `buf` (the bytes the request may take). On success `line` is
// the line without its line end and `next` the index after it.
std::optional<parse_result> framing_line(std::string_view buf, std::size_t pos,
                                         std::size_t limit_end, std::string_view& line,
                                         std::size_t& next) {
  const void* nl = std::memchr(buf.data() + pos, '\n', buf.size() - pos);
  const std::size_t line_end =
      nl == nullptr ? buf.size()
                    : static_cast<std::size_t>(static_cast<const char*>(nl) - buf.data());
  // Looked for within the line's limit only, so that a prefix past the limit and the whole
  // buffer agree (as in the head).
  if (syntax::has_bare_cr(buf, pos, std::min(line_end, pos + max_framing_line + 1))) {
    return parse_failure(400, "bare CR in the chunked framing");
  }
  if (nl == nullptr) {
    std::size_t have = buf.size() - pos;
    if (have > 0 && buf.back() == '\r') --have;
    if (have > max_framing_line) return parse_failure(400, "chunk-size or trailer line too long");
    // Again at a line end, or at the length that makes the line too long (or the request).
    const std::size_t too_long = std::max(pos + max_framing_line + 1, buf.size() + 1);
    return wait_for(too_long > limit_end ? limit_end + 1 : too_long, true);
  }
  line = buf.substr(pos, line_end - pos);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() > max_framing_line)
    return parse_failure(400, "chunk-size or trailer line too long");
  next = line_end + 1;
  return std::nullopt;
}

// Decodes the chunked body from `head_end` in `buf`, which holds at most the `limit_end` bytes
// the request may take.
parse_result decode_chunked(std::string_view buf, std::size_t head_end, std::size_t limit_end,
                            const limits& lim, request& out) {
  std::string& body = out.decoded_body;
  body.clear();
  std::size_t pos = head_end;
  std::string_view line;
  std::size_t next = 0;
  for (std::size_t chunks = 0;; ++chunks) {
    if (auto stop = framing_line(buf, pos, limit_end, line, next)) return *stop;
    std::uint64_t size = 0;
    if (const char* why = parse_chunk_size_line(line, size)) return parse_failure(400, why);
    pos = next;
    if (size == 0) break;
    if (chunks == max_chunks) return parse_failure(413, "request body in too many chunks");
    if (size > lim.max_body - body.size()) return parse_failure(413, "request body too large");
    // The data and at least a LF must fit within the request's limit.
    if (size >= limit_end - pos) return parse_failure(413, "request too large");
    const auto data_end = pos + static_cast<std::size_t>(size);
    if (buf.size() <= data_end) return wait_for(data_end + 1, false);
    if (buf[data_end] == '\n') {
      next = data_end + 1;
    } else if (buf[data_end] == '\r') {
      if (data_end + 1 == buf.size()) return wait_for(data_end + 2, false);
      if (buf[data_end + 1] != '\n') return parse_failure(400, "bare CR in the chunked framing");
      next = data_end + 2;
    } else {
      return parse_failure(400, "chunk data not followed by a line end");
    }
    body.append(buf.data() + pos, static_cast<std::size_t>(size));
    pos = next;
  }
  // The trailer section: field lines, checked and discarded, up to an empty line.
  for (std::size_t fields = 0;; ++fields) {
    if (auto stop = framing_line(buf, pos, limit_end, line, next)) return *stop;
    pos = next;
    if (line.empty()) break;
    if (fields == lim.max_headers) return parse_failure(431, "too many trailer lines");
    std::string_view name;
    std::string_view value;
    if (const char* why = syntax::split_field_line(line, name, value)) {
      return parse_failure(400, why);
    }
  }
  out.content_length = body.size();
  out.body = body;
  parse_result r;
  r.status = parse_status::complete;
  r.consumed = pos;
  return r;
}

parse_result read_chunked_body(std::string_view buffer, std::size_t head_end, const limits& lim,
                               request& out) {
  out.chunked = true;
  // The request as sent, head and framing included, fits the connection's buffer.
  const std::size_t limit_end = saturating_add(lim.max_head, lim.max_body);
  if (head_end >= limit_end) return parse_failure(413, "request too large");
  parse_result r = decode_chunked(buffer.substr(0, std::min(buffer.size(), limit_end)), head_end,
                                  limit_end, lim, out);
  if (r.status == parse_status::incomplete) {
    if (buffer.size() > limit_end) return parse_failure(413, "request too large");
    r.needs_continue = out.expect_continue && buffer.size() == head_end;
  }
  return r;
}

}  // namespace

parse_result read_body(std::string_view buffer, std::size_t head_end, const body_framing& framing,
                       const limits& lim, request& out) {
  if (framing.chunked) return read_chunked_body(buffer, head_end, lim, out);
  out.content_length = framing.content_length;
  if (out.content_length > lim.max_body) return parse_failure(413, "request body too large");

  const std::size_t body_have = buffer.size() - head_end;
  if (body_have < out.content_length) {
    parse_result r;
    r.needs_continue = out.expect_continue && body_have == 0;
    r.needed = saturating_add(head_end, static_cast<std::size_t>(out.content_length));
    return r;
  }
  out.body = buffer.substr(head_end, static_cast<std::size_t>(out.content_length));
  parse_result r;
  r.status = parse_status::complete;
  r.consumed = head_end + out.body.size();
  return r;
}

}  // namespace spoold::http
