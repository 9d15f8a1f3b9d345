// The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2): the line or block
// a proxy sends before anything else on a connection it relays, naming the client it relays
// for. spoold reads it from --trust peers under --proxy-protocol (server/README.md,
// "PROXY protocol").
//
// Like parse_request, the parser is stateless: the caller passes every header byte received so
// far and calls again with more after `incomplete`. `incomplete` means that every byte passed
// belongs to the header (its end is not among them), so the caller may consume them all; it
// never reads past the header's end, which `length` gives once `complete`.
//
// What is accepted:
//   * v1: "PROXY TCP4 SRC DST SPORT DPORT\r\n" (or TCP6), single spaces, at most 107 bytes with
//     the CRLF; addresses as inet_pton reads them, TCP4 addresses IPv4 and TCP6 IPv6; ports
//     decimal 0..65535 without leading zeros. "PROXY UNKNOWN" followed by anything up to the
//     CRLF: no address (use the connection's own).
//   * v2: the 12-byte signature, version 2, command LOCAL (no address) or PROXY; family INET or
//     INET6 with transport STREAM gives the source address; family UNSPEC or UNIX (any
//     transport) gives no address. The address block may be followed by TLVs, which are skipped.
//     The declared length is at most max_v2_payload.
// Everything else is an error: a first byte that starts neither signature, a bad field, a
// header longer than its limit. Each error is decided as soon as the bytes show it, so parsing
// a prefix gives `incomplete` or the same result as the whole (the fuzz target checks it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spoold::http {

inline constexpr std::size_t max_v1_header = 107;  // the spec's bound, CRLF included
inline constexpr std::size_t v2_fixed_part = 16;   // signature, version/command, family, length
inline constexpr std::size_t max_v2_payload = 2048 - v2_fixed_part;
// The most bytes any accepted header takes.
inline constexpr std::size_t max_proxy_header = v2_fixed_part + max_v2_payload;

enum class proxy_status {
  incomplete,  // every byte passed is header; pass more
  complete,    // the header is `length` bytes
  error,       // not a valid header: close the connection
};

enum class proxy_error : std::uint8_t {
  none,
  not_proxy,  // the bytes start neither signature
  malformed,  // a bad field, character or version
  oversized,  // longer than its version allows (107 bytes; max_v2_payload)
};

struct proxy_header_result {
  proxy_status status = proxy_status::incomplete;
  proxy_error error = proxy_error::none;
  std::size_t length = 0;  // complete: bytes of the header
  int version = 0;         // 1 or 2, once known
  // complete: true if the header names the source; false for v1 UNKNOWN, v2 LOCAL and the
  // families that carry no IP address: use the connection's own peer then.
  bool has_source = false;
  // The source address in IPv6 form (an IPv4 source as ::ffff:a.b.c.d), and its port.
  std::array<std::uint8_t, 16> source{};
  std::uint16_t source_port = 0;
};

proxy_header_result parse_proxy_header(std::string_view bytes) noexcept;

// The error's name, for messages and tests ("not a PROXY header", ...).
std::string_view proxy_error_text(proxy_error e) noexcept;

}  // namespace spoold::http
