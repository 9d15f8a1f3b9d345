// Request parsing: one complete request (head and body) out of a byte buffer.
//
// The parser is stateless between calls: a connection appends what it reads to its buffer and
// calls parse_request again; `incomplete` means "read more". It never reads past `buffer`, never
// allocates more than the request's header vector and its decoded path, and every malformed or
// oversized input ends in `error` with the status to answer (the fuzz target in
// tests/fuzz/fuzz_request.cpp holds it to that).
//
// Each error is decided at the first line that shows it, so parsing a prefix of a buffer gives
// either `incomplete` or the same result as the whole buffer; bad method bytes are refused
// before the request line ends (a TLS handshake on the plain port gets 400 at once).
//
// What is accepted:
//   * CRLF or bare LF line ends; a bare CR is refused (400) as soon as the byte after it is in.
//     Empty lines (16 bytes at most) before the request line.
//   * "METHOD SP target SP HTTP/1.x", single spaces; HTTP/1.2 and later minor versions are
//     taken as HTTP/1.1, other major versions refused (505). Methods are case-sensitive. The target
//     is origin-form ("/p?q"), absolute-form ("http://host/p?q", its path is used) or "*" for
//     OPTIONS; its bytes may not be control characters (raw UTF-8 is let through). The path is
//     decoded and normalised as described in http/target.hpp.
//   * Header lines "name: value" with a token name directly before the colon; the value may
//     hold HTAB, SP, visible ASCII and bytes >= 0x80. Line folding is refused.
//   * HTTP/1.1 requests need exactly one Host header; a Host value must be host[:port] (RFC
//     3986 reg-name, IPv4 or bracketed IP literal, digits for the port). Content-Length is a
//     plain decimal number (repeats must agree). Transfer-Encoding must be "chunked" alone
//     (other codings: 501) and not beside Content-Length (400); body.hpp decodes the body.
//   * Connection is a comma list of tokens: "close" ends keep-alive, "keep-alive" enables it
//     for HTTP/1.0. "Expect: 100-continue" counts for HTTP/1.1 only (RFC 9110, 10.1.1).
#pragma once

#include <cstddef>
#include <string_view>

#include "http/request.hpp"

namespace spoold::http {

struct limits {
  std::size_t max_request_line = 8 * 1024;  // longer: 414 URI Too Long
  std::size_t max_head = 16 * 1024;         // request line + headers + blank line; longer: 431
  std::size_t max_headers = 100;            // more header lines: 431
  std::size_t max_body = 64 * 1024;         // larger body (Content-Length or chunked): 413
};

enum class parse_status {
  incomplete,  // need more bytes; `needs_continue` says whether to send "100 Continue" first
  complete,    // `out` holds a request of `consumed` bytes (head + body)
  error,       // answer `error_status` and close the connection
};

struct parse_result {
  parse_status status = parse_status::incomplete;
  std::size_t consumed = 0;
  // The head is complete, the client sent "Expect: 100-continue" for a non-empty body and no
  // byte of that body has arrived yet. The connection sends "100 Continue" once per request
  // (a second parse before the client reacts says the same again).
  bool needs_continue = false;
  // Incomplete with the head complete: the buffer length at which parsing again can change the
  // answer (for a Content-Length body, the length at which the request is whole). 0 while the
  // head itself is incomplete. Lets a caller skip parsing again until then.
  std::size_t needed = 0;
  // Incomplete in a line of a chunked body's framing: parsing again can also change the answer
  // once a CR or LF arrives, before `needed`.
  bool awaits_line = false;
  // On error: 400 malformed (bad request line, bad header, a bare CR as a line end, bad
  // percent-encoding, NUL in the path, a path that climbs above '/', conflicting
  // Content-Length, missing or repeated Host on HTTP/1.1, a Host that is not host[:port],
  // Transfer-Encoding beside Content-Length or in HTTP/1.0, chunked twice, bad chunked
  // framing, too many empty lines before the request line), 413 (body too large, body.hpp),
  // 414, 431, 501 (unknown method or transfer coding), 505 (not HTTP/1.x).
  int error_status = 0;
  std::string_view error_reason;  // a short static English text for the response body
};

parse_result parse_request(std::string_view buffer, const limits& lim, request& out);

// An `error` result: answer `status`; `reason` is a static text.
parse_result parse_failure(int status, std::string_view reason) noexcept;

}  // namespace spoold::http
