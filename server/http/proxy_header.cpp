#include "http/proxy_header.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace spoold::http {
namespace {

constexpr std::string_view v1_signature = "PROXY ";
constexpr std::string_view v2_signature{"\r\n\r\n\0\r\nQUIT\n", 12};

// v2's address blocks: source and destination addresses, then their ports.
constexpr std::size_t v2_inet_block = 12;
constexpr std::size_t v2_inet6_block = 36;
constexpr std::size_t v2_unix_block = 216;

proxy_header_result failed(int version, proxy_error e) noexcept {
  proxy_header_result r;
  r.status = proxy_status::error;
  r.error = e;
  r.version = version;
  return r;
}

bool parse_port(std::string_view text, std::uint16_t& out) noexcept {
  if (text.empty() || text.size() > 5 || (text.size() > 1 && text[0] == '0')) return false;
  std::uint32_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (value > 65535) return false;
  out = static_cast<std::uint16_t>(value);
  return true;
}

// `text` as an address of `family` (AF_INET or AF_INET6), in IPv6 form.
bool parse_address(std::string_view text, int family, std::array<std::uint8_t, 16>& out) noexcept {
  char z[64];
  if (text.empty() || text.size() >= sizeof z) return false;
  std::memcpy(z, text.data(), text.size());
  z[text.size()] = '\0';
  if (family == AF_INET6) return ::inet_pton(AF_INET6, z, out.data()) == 1;
  out = {};
  out[10] = out[11] = 0xff;
  return ::inet_pton(AF_INET, z, out.data() + 12) == 1;
}

// The line "PROXY ...", CRLF excluded: "TCP4 SRC DST SPORT DPORT", "TCP6 ..." or "UNKNOWN[ ...]".
proxy_header_result parse_v1_line(std::string_view line, std::size_t length) noexcept {
  line.remove_prefix(v1_signature.size());
  proxy_header_result r;
  r.version = 1;
  r.length = length;
  if (line == "UNKNOWN" || line.starts_with("UNKNOWN ")) {
    r.status = proxy_status::complete;
    return r;
  }
  std::string_view fields[5];
  std::size_t n = 0;
  for (std::size_t start = 0;;) {
    const std::size_t space = line.find(' ', start);
    if (n == 5) return failed(1, proxy_error::malformed);
    fields[n++] = line.substr(start, space == std::string_view::npos ? space : space - start);
    if (space == std::string_view::npos) break;
    start = space + 1;
  }
  if (n != 5) return failed(1, proxy_error::malformed);
  int family = 0;
  if (fields[0] == "TCP4") {
    family = AF_INET;
  } else if (fields[0] == "TCP6") {
    family = AF_INET6;
  } else {
    return failed(1, proxy_error::malformed);
  }
  std::array<std::uint8_t, 16> destination{};
  std::uint16_t destination_port = 0;
  if (!parse_address(fields[1], family, r.source) ||
      !parse_address(fields[2], family, destination) || !parse_port(fields[3], r.source_port) ||
      !parse_port(fields[4], destination_port)) {
    return failed(1, proxy_error::malformed);
  }
  r.status = proxy_status::complete;
  r.has_source = true;
  return r;
}

// Scans byte by byte, so that the first byte that decides the outcome decides it for every
// longer buffer too.
proxy_header_result parse_v1(std::string_view bytes) noexcept {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (i < v1_signature.size()) {
      if (c != v1_signature[i]) return failed(1, proxy_error::not_proxy);
      continue;
    }
    if (c == '\n') {
      if (bytes[i - 1] != '\r') return failed(1, proxy_error::malformed);
      return parse_v1_line(bytes.substr(0, i - 1), i + 1);
    }
    if (i > 0 && bytes[i - 1] == '\r') return failed(1, proxy_error::malformed);  // a bare CR
    if (c != '\r' && (c < 0x20 || c > 0x7e)) return failed(1, proxy_error::malformed);
    if (i + 1 >= max_v1_header) return failed(1, proxy_error::oversized);  // no room for LF
  }
  return {};
}

proxy_header_result parse_v2(std::string_view bytes) noexcept {
  const std::size_t known = std::min(bytes.size(), v2_signature.size());
  if (bytes.substr(0, known) != v2_signature.substr(0, known)) {
    return failed(2, proxy_error::not_proxy);
  }
  proxy_header_result r;
  r.version = 2;
  if (bytes.size() <= 12) return r;
  const auto version_command = static_cast<std::uint8_t>(bytes[12]);
  const unsigned command = version_command & 0x0f;
  if ((version_command >> 4) != 2 || command > 1) return failed(2, proxy_error::malformed);
  if (bytes.size() <= 13) return r;
  const auto family_transport = static_cast<std::uint8_t>(bytes[13]);
  const unsigned family = family_transport >> 4;
  const unsigned transport = family_transport & 0x0f;
  if (family > 3 || transport > 2) return failed(2, proxy_error::malformed);
  const bool proxied = command == 1;
  // An IP source is taken only from a relayed TCP stream.
  if (proxied && (family == 1 || family == 2) && transport != 1) {
    return failed(2, proxy_error::malformed);
  }
  if (bytes.size() < v2_fixed_part) return r;
  const std::size_t payload = (std::size_t{static_cast<std::uint8_t>(bytes[14])} << 8) |
                              static_cast<std::uint8_t>(bytes[15]);
  if (payload > max_v2_payload) return failed(2, proxy_error::oversized);
  const std::size_t block = !proxied      ? 0
                            : family == 1 ? v2_inet_block
                            : family == 2 ? v2_inet6_block
                            : family == 3 ? v2_unix_block
                                          : 0;
  if (payload < block) return failed(2, proxy_error::malformed);
  if (bytes.size() < v2_fixed_part + payload) return r;

  r.status = proxy_status::complete;
  r.length = v2_fixed_part + payload;
  if (!proxied || (family != 1 && family != 2)) return r;  // LOCAL, UNSPEC, UNIX: no address
  const auto* a = reinterpret_cast<const std::uint8_t*>(bytes.data()) + v2_fixed_part;
  std::size_t port_at = 0;
  if (family == 1) {
    r.source = {};
    r.source[10] = r.source[11] = 0xff;
    std::memcpy(r.source.data() + 12, a, 4);
    port_at = 8;
  } else {
    std::memcpy(r.source.data(), a, 16);
    port_at = 32;
  }
  r.source_port = static_cast<std::uint16_t>((a[port_at] << 8) | a[port_at + 1]);
  r.has_source = true;
  return r;
}

}  // namespace

proxy_header_result parse_proxy_header(std::string_view bytes) noexcept {
  if (bytes.empty()) return {};
  if (bytes[0] == v1_signature[0]) return parse_v1(bytes);
  if (bytes[0] == v2_signature[0]) return parse_v2(bytes);
  return failed(0, proxy_error::not_proxy);
}

std::string_view proxy_error_text(proxy_error e) noexcept {
  switch (e) {
    case proxy_error::none:
      return "no error";
    case proxy_error::not_proxy:
      return "not a PROXY header";
    case proxy_error::malformed:
      return "malformed PROXY header";
    case proxy_error::oversized:
      return "PROXY header too long";
  }
  return "unknown";
}

}  // namespace spoold::http
