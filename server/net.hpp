// Socket addresses and listening sockets: the one place that knows the address families (IPv4
// and IPv6). A bind address is parsed only here, and a client's address is kept and printed only
// through peer_address.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spoold {

// An IP address in IPv6 form: an IPv4 address as the IPv6 address that maps it
// (::ffff:a.b.c.d), so one comparison serves both families.
struct ip_address {
  std::array<std::uint8_t, 16> bytes{};

  [[nodiscard]] bool is_v4() const noexcept;
  [[nodiscard]] std::string text() const;  // as peer_address::text() prints it
  friend bool operator==(const ip_address&, const ip_address&) = default;
};

// "10.1.2.3", "2001:db8::1" (no brackets, no port); nullopt for anything else.
std::optional<ip_address> parse_ip_address(std::string_view text);

// An address range, --trust's "ADDR/PREFIX" (an address alone: just that address).
struct ip_range {
  ip_address base;    // bits past the prefix are zero
  unsigned bits = 0;  // of the IPv6 form: an IPv4 /N is 96 + N

  [[nodiscard]] bool contains(const ip_address& a) const noexcept;
};

std::optional<ip_range> parse_ip_range(std::string_view text);

// A client's address as accept() reported it. The storage holds any family.
struct peer_address {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;

  [[nodiscard]] sockaddr* data() noexcept { return reinterpret_cast<sockaddr*>(&storage); }
  // "127.0.0.1", "::1"; a v4-mapped IPv6 address (a client of a dual-stack listener) as the
  // IPv4 address it maps, so a client reads the same whichever way it came in; "-" when it
  // cannot be printed.
  [[nodiscard]] std::string text() const;
  // The address; nullopt for a family other than IPv4 and IPv6.
  [[nodiscard]] std::optional<ip_address> ip() const noexcept;
};

// True if `text` is a --bind address: IPv4 ("127.0.0.1") or IPv6, bare ("::1") or in the
// brackets of a URL ("[::1]").
bool is_bind_address(std::string_view text);

// A --bind address as the host of a URL: "127.0.0.1", "[::1]".
std::string url_host(std::string_view bind);

// A listening TCP socket on bind:port with SO_REUSEADDR (and SO_REUSEPORT when reuse_port, so
// that each event loop can own one and the kernel spreads connections over them), non-blocking
// and close-on-exec, with a backlog sized for thousands of pending connections (the kernel caps
// it at net.core.somaxconn). An IPv6 socket is dual-stack (IPV6_V6ONLY off): bound to "::" it
// takes IPv4 clients too, as v4-mapped addresses. Throws std::system_error naming the address.
int listen_tcp(const std::string& bind, std::uint16_t port, bool reuse_port);

std::uint16_t local_port(int fd);  // the port a socket is bound to (after binding port 0)

// The largest open-file limit the process may have: raises the soft RLIMIT_NOFILE to the hard one
// and returns it.
std::uint64_t raise_fd_limit();

}  // namespace spoold
