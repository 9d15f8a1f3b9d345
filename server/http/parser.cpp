// parse_request: see parser.hpp for the contract.
//
// The parser reads the buffer front to back once per call and decides each error at the first
// line that shows it, in stream order. That makes the outcome monotone in the bytes received:
// parsing any prefix of a buffer gives either `incomplete` or exactly what the whole buffer
// gives (the fuzz target checks this), so a connection can call it after every read.
#include "http/parser.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include <arpa/inet.h>

#include "http/body.hpp"
#include "http/syntax.hpp"
#include "http/target.hpp"

namespace spoold::http {

namespace {

using syntax::has_bare_cr;
using syntax::has_class;
using syntax::target_char;
using syntax::token_char;
using syntax::trim_spaces;

// RFC 9112 asks servers to ignore at least one empty line before a request line (clients
// have sent a stray CRLF after a POST body); empty lines totalling this many bytes are
// tolerated, an endless stream is not.
constexpr std::size_t max_leading_empty_bytes = 16;
// Longer than any method in `method`: a token that runs past this is refused (501) at once,
// without waiting for the rest of the line.
constexpr std::size_t max_method_length = 16;

parse_result incomplete() { return {}; }

parse_result fail(int status, std::string_view reason) { return parse_failure(status, reason); }

// The line from `from` up to the '\n' at `line_end`, without the CR of a CRLF.
std::string_view line_at(std::string_view buf, std::size_t from, std::size_t line_end) noexcept {
  std::string_view line = buf.substr(from, line_end - from);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// What the header lines said that the parser acts on.
struct head_facts {
  bool http10 = false;  // the request line said HTTP/1.0
  bool has_host = false;
  body_framing framing;
  bool connection_close = false;
  bool connection_keep_alive = false;
  bool expect_continue = false;
};

// Skips empty lines before the request line; nullopt when a request line may start at `pos`.
std::optional<parse_result> skip_empty_lines(std::string_view buf, std::size_t& pos) {
  while (pos < buf.size() && (buf[pos] == '\r' || buf[pos] == '\n')) {
    const std::size_t length = buf[pos] == '\n' ? 1 : 2;
    if (pos + length > max_leading_empty_bytes) {
      return fail(400, "too many empty lines before the request");
    }
    if (length == 2) {
      if (pos + 1 == buf.size()) return incomplete();
      if (buf[pos + 1] != '\n') return fail(400, "bare CR before the request line");
    }
    pos += length;
  }
  if (pos == buf.size()) return incomplete();
  return std::nullopt;
}

// The method token, decided as soon as its bytes are in: a client that speaks something else
// (a TLS handshake, say) gets its 400 without the server waiting for a line end.
std::optional<parse_result> parse_method(std::string_view buf, std::size_t start, request& out) {
  std::size_t i = start;
  while (i < buf.size() && i - start <= max_method_length && buf[i] != ' ') {
    if (!has_class(buf[i], token_char)) return fail(400, "malformed request line");
    ++i;
  }
  if (i - start > max_method_length) return fail(501, "unknown method");
  if (i == buf.size()) return incomplete();
  if (i == start) return fail(400, "malformed request line");
  out.method_text = buf.substr(start, i - start);
  const std::optional<method> m = find_method(out.method_text);
  if (!m) return fail(501, "unknown method");
  out.verb = *m;
  return std::nullopt;
}

// "HTTP/1.1" -> minor 1. A later minor version of HTTP/1 (HTTP/1.2) is answered as HTTP/1.1,
// the highest this server speaks (RFC 9110, 2.5: a minor version is backwards compatible).
std::optional<parse_result> parse_version(std::string_view v, request& out) {
  if (v.size() != 8 || v.substr(0, 5) != "HTTP/" || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
      v[7] < '0' || v[7] > '9') {
    return fail(400, "malformed HTTP version");
  }
  if (v[5] != '1') return fail(505, "HTTP version not supported");
  out.version_minor = v[7] == '0' ? 0 : 1;
  return std::nullopt;
}

std::string_view target_error_reason(target_status s) noexcept {
  switch (s) {
    case target_status::ok:
      break;
    case target_status::malformed:
      return "malformed request target";
    case target_status::bad_escape:
      return "malformed percent-encoding in the path";
    case target_status::nul_byte:
      return "NUL byte in the path";
    case target_status::climbs_above_root:
      return "path climbs above the root";
  }
  return "malformed request target";
}

// The request line from `start`; on success `next` is the index after its line end.
std::optional<parse_result> parse_request_line(std::string_view buf, std::size_t start,
                                               const limits& lim, request& out, std::size_t& next) {
  if (auto stop = parse_method(buf, start, out)) return stop;
  const std::size_t after_method = start + out.method_text.size() + 1;
  const void* nl = std::memchr(buf.data() + after_method, '\n', buf.size() - after_method);
  // A bare CR is refused before the line ends (a client that ends its lines with CR alone would
  // otherwise wait out the header timeout). Only the bytes within the line's limit are looked
  // at, so that a prefix past the limit (414) and the whole line agree.
  const std::size_t scan_end =
      (nl == nullptr ? buf.size()
                     : static_cast<std::size_t>(static_cast<const char*>(nl) - buf.data()));
  if (has_bare_cr(buf, after_method, std::min(scan_end, start + lim.max_request_line + 1))) {
    return fail(400, "bare CR in the request line");
  }
  if (nl == nullptr) {
    // A CR at the very end may be the start of the line's CRLF, so it does not count yet.
    std::size_t have = buf.size() - start;
    if (buf.back() == '\r') --have;
    if (have > lim.max_request_line) return fail(414, "request line too long");
    return incomplete();
  }
  const auto line_end = static_cast<std::size_t>(static_cast<const char*>(nl) - buf.data());
  const std::string_view line = line_at(buf, start, line_end);
  if (line.size() > lim.max_request_line) return fail(414, "request line too long");

  const std::string_view rest = line.substr(out.method_text.size() + 1);
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos) return fail(400, "malformed request line");
  if (auto stop = parse_version(rest.substr(space + 1), out)) return stop;
  out.target = rest.substr(0, space);
  for (const char c : out.target) {
    if (!has_class(c, target_char)) return fail(400, "malformed request target");
  }
  const target_status ts =
      parse_target(out.target, out.verb == method::options, out.path, out.query);
  if (ts != target_status::ok) return fail(400, target_error_reason(ts));

  next = line_end + 1;
  if (next - start > lim.max_head) return fail(431, "request head too large");
  return std::nullopt;
}

// "Content-Length: 123": digits only (a list such as "5, 5" is refused), no overflow, and a
// repeated header must repeat the same value (else the body's end is ambiguous: smuggling).
std::optional<parse_result> record_content_length(std::string_view value, body_framing& framing) {
  if (value.empty()) return fail(400, "malformed Content-Length");
  std::uint64_t n = 0;
  for (const char c : value) {
    if (c < '0' || c > '9') return fail(400, "malformed Content-Length");
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (UINT64_MAX - digit) / 10) return fail(400, "Content-Length too large");
    n = n * 10 + digit;
  }
  if (framing.has_content_length && n != framing.content_length) {
    return fail(400, "conflicting Content-Length headers");
  }
  if (framing.chunked) return fail(400, "both Content-Length and Transfer-Encoding");
  framing.has_content_length = true;
  framing.content_length = n;
  return std::nullopt;
}

// IP-literal without its brackets (RFC 3986, 3.2.2): an IPv6 address or an IPvFuture.
bool is_ip_literal(std::string_view s) noexcept {
  if (!s.empty() && (s[0] == 'v' || s[0] == 'V')) {
    std::size_t i = 1;
    while (i < s.size() && syntax::is_hex_digit(s[i])) ++i;
    if (i == 1 || i == s.size() || s[i] != '.' || i + 1 == s.size()) return false;
    for (++i; i < s.size(); ++i) {
      if (!has_class(s[i], syntax::reg_name_char) && s[i] != ':') return false;
    }
    return true;
  }
  char text[INET6_ADDRSTRLEN];
  if (s.empty() || s.size() >= sizeof text) return false;
  std::memcpy(text, s.data(), s.size());
  text[s.size()] = '\0';
  unsigned char addr[16];
  return inet_pton(AF_INET6, text, addr) == 1;
}

// A Host value (RFC 9112, 3.2): uri-host [":" port] as RFC 3986 defines them. uri-host is an
// IP-literal in brackets or a reg-name (unreserved, sub-delims, percent-escapes; IPv4 addresses
// are reg-names too) and may be empty; port is digits, possibly none.
bool is_host_value(std::string_view v) noexcept {
  std::size_t i = 0;
  if (!v.empty() && v[0] == '[') {
    const std::size_t close = v.find(']');
    if (close == std::string_view::npos || !is_ip_literal(v.substr(1, close - 1))) return false;
    i = close + 1;
  } else {
    while (i < v.size() && v[i] != ':') {
      if (v[i] == '%') {
        if (i + 2 >= v.size() || !syntax::is_hex_digit(v[i + 1]) ||
            !syntax::is_hex_digit(v[i + 2])) {
          return false;
        }
        i += 3;
      } else if (has_class(v[i], syntax::reg_name_char)) {
        ++i;
      } else {
        return false;
      }
    }
  }
  if (i == v.size()) return true;
  if (v[i] != ':') return false;
  for (++i; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return false;
  }
  return true;
}

// "Transfer-Encoding: chunked" (RFC 9112, 6.1). The only coding spoold decodes is chunked, and a
// request's body must end with it; so the one list it takes is "chunked" alone, as one or more
// headers with empty list elements around it. Any other coding, before chunked or not, is not
// implemented (501); chunked twice, chunked with parameters, or an empty list is malformed
// framing (400); so is Transfer-Encoding in an HTTP/1.0 request (6.1: its framing is faulty) or
// beside Content-Length (6.3: a smuggling attempt, refused rather than resolved).
std::optional<parse_result> record_transfer_encoding(std::string_view value, head_facts& facts) {
  if (facts.http10) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
  bool any = false;
  while (!value.empty() || !any) {
    const std::size_t comma = value.find(',');
    const std::string_view element = trim_spaces(value.substr(0, comma));
    value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    if (element.empty()) {
      if (comma == std::string_view::npos && !any) {
        return fail(400, "empty Transfer-Encoding");
      }
      continue;
    }
    any = true;
    const std::string_view name = trim_spaces(element.substr(0, element.find(';')));
    if (!syntax::is_token(name)) return fail(400, "malformed Transfer-Encoding");
    if (!ascii_iequals(name, "chunked")) return fail(501, "transfer coding not implemented");
    if (name.size() != element.size()) return fail(400, "parameters on the chunked coding");
    if (facts.framing.chunked) return fail(400, "chunked coding applied twice");
    facts.framing.chunked = true;
  }
  if (facts.framing.has_content_length) {
    return fail(400, "both Content-Length and Transfer-Encoding");
  }
  return std::nullopt;
}

void record_connection(std::string_view value, head_facts& facts) noexcept {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    const std::string_view token = trim_spaces(value.substr(0, comma));
    if (ascii_iequals(token, "close")) facts.connection_close = true;
    if (ascii_iequals(token, "keep-alive")) facts.connection_keep_alive = true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

// The headers the parser itself must understand; names are compared by length first, so the
// other headers cost one switch.
std::optional<parse_result> record_header(const header& h, head_facts& facts) {
  switch (h.name.size()) {
    case 4:
      if (ascii_iequals(h.name, "host")) {
        if (facts.has_host) return fail(400, "more than one Host header");
        if (!is_host_value(h.value)) return fail(400, "malformed Host header");
        facts.has_host = true;
      }
      break;
    case 6:
      if (ascii_iequals(h.name, "expect") && ascii_iequals(h.value, "100-continue")) {
        facts.expect_continue = true;
      }
      break;
    case 10:
      if (ascii_iequals(h.name, "connection")) record_connection(h.value, facts);
      break;
    case 14:
      if (ascii_iequals(h.name, "content-length")) {
        return record_content_length(h.value, facts.framing);
      }
      break;
    case 17:
      if (ascii_iequals(h.name, "transfer-encoding")) {
        return record_transfer_encoding(h.value, facts);
      }
      break;
    default:
      break;
  }
  return std::nullopt;
}

// One header line (without its line end).
std::optional<parse_result> parse_header_line(std::string_view line, head_facts& facts,
                                              request& out) {
  header h;
  if (const char* why = syntax::split_field_line(line, h.name, h.value)) return fail(400, why);
  out.headers.push_back(h);
  return record_header(out.headers.back(), facts);
}

// The header lines from `pos` up to and including the blank line; `head_end` is the index after
// it. Size limits are checked before a line's content, so a prefix that is already too large
// and a longer buffer with the same start agree on 431.
std::optional<parse_result> parse_headers(std::string_view buf, std::size_t start, std::size_t pos,
                                          const limits& lim, head_facts& facts, request& out,
                                          std::size_t& head_end) {
  std::size_t count = 0;
  for (;;) {
    const void* nl = std::memchr(buf.data() + pos, '\n', buf.size() - pos);
    const std::size_t line_end =
        nl == nullptr ? buf.size()
                      : static_cast<std::size_t>(static_cast<const char*>(nl) - buf.data());
    // As in the request line: a bare CR is refused at once, looked for within the head's limit.
    if (has_bare_cr(buf, pos, std::min(line_end, start + lim.max_head))) {
      return fail(400, "bare CR in a header line");
    }
    if (nl == nullptr) {
      if (buf.size() - start > lim.max_head) return fail(431, "request head too large");
      return incomplete();
    }
    if (line_end + 1 - start > lim.max_head) return fail(431, "request head too large");
    const std::string_view line = line_at(buf, pos, line_end);
    pos = line_end + 1;
    if (line.empty()) break;
    if (++count > lim.max_headers) return fail(431, "too many header lines");
    if (auto stop = parse_header_line(line, facts, out)) return stop;
  }
  head_end = pos;
  return std::nullopt;
}

}  // namespace

parse_result parse_failure(int status, std::string_view reason) noexcept {
  parse_result r;
  r.status = parse_status::error;
  r.error_status = status;
  r.error_reason = reason;
  return r;
}

parse_result parse_request(std::string_view buffer, const limits& lim, request& out) {
  out.clear();
  std::size_t start = 0;
  if (auto stop = skip_empty_lines(buffer, start)) return *stop;
  std::size_t headers_start = 0;
  if (auto stop = parse_request_line(buffer, start, lim, out, headers_start)) return *stop;
  head_facts facts;
  facts.http10 = out.version_minor == 0;
  std::size_t head_end = 0;
  if (auto stop = parse_headers(buffer, start, headers_start, lim, facts, out, head_end)) {
    return *stop;
  }

  // The head is complete: what it means as a whole.
  const bool http11 = out.version_minor == 1;
  out.keep_alive =
      http11 ? !facts.connection_close : facts.connection_keep_alive && !facts.connection_close;
  // An HTTP/1.0 client cannot know 100 Continue; RFC 9110, 10.1.1 says to ignore its Expect.
  out.expect_continue = http11 && facts.expect_continue;
  if (http11 && !facts.has_host) return fail(400, "missing Host header");
  return read_body(buffer, head_end, facts.framing, lim, out);
}

}  // namespace spoold::http
