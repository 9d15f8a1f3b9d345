// The request body: where it ends, as the head frames it. parse_request calls read_body once the
// head is complete; this is the one place that knows body framings.
//
// Two framings (RFC 9112, 6):
//   * Content-Length: the body stays in the connection's buffer and request::body views it.
//     A length above limits::max_body is refused from the head alone (413).
//   * Transfer-Encoding: chunked (parser.cpp accepts no other coding): the chunks that have
//     arrived are decoded into request::decoded_body, which request::body then views once the
//     last chunk and the trailer section are in. Chunk extensions are checked for syntax and
//     ignored; trailer fields are checked like header lines and discarded. Limits: the decoded
//     body as for Content-Length (413, decided at the chunk-size line that passes it); the
//     request as sent, head and chunked body, at most max_head + max_body bytes (413: framing
//     overhead cannot make a request outgrow the connection's buffer); at most 1024 chunks (413)
//     and limits::max_headers trailer lines (431); each chunk-size or trailer line at most
//     8 KiB (400). A malformed chunk size, extension or trailer, chunk data not followed by a
//     line end, or a bare CR anywhere in the framing is 400. Line ends are CRLF or LF alone, as
//     in the head.
//
// Like the parser, read_body is stateless: it decodes from the start of the body on every call
// and decides each error at the first byte that shows it, so a prefix gives `incomplete` or the
// same answer as the whole. The connection's worth_parsing() keeps it from decoding again for
// every few bytes that arrive: an incomplete result says from which buffer length (`needed`),
// or from which line end (`awaits_line`), decoding again can change the answer. The chunk limit
// bounds what decoding again after every line costs.
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
  bool chunked = false;  // "Transfer-Encoding: chunked"
};

// The body of the request whose head ends at `head_end` in `buffer`. `complete` fills out.body
// and counts head and body in `consumed`; `incomplete` sets `needed` (and `awaits_line`) and
// `needs_continue`; `error` carries 400, 413 or 431.
parse_result read_body(std::string_view buffer, std::size_t head_end, const body_framing& framing,
                       const limits& lim, request& out);

}  // namespace spoold::http
