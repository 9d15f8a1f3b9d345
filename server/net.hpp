// Socket addresses and listening sockets: the one place that knows the address family. A bind
// address is parsed only by listen_tcp, and a client's address is kept and printed only through
// peer_address, so a second family means changing these two.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace spoold {

// A client's address as accept() reported it. The storage holds any family; text() knows IPv4.
struct peer_address {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;

  [[nodiscard]] sockaddr* data() noexcept { return reinterpret_cast<sockaddr*>(&storage); }
  [[nodiscard]] std::string text() const;  // "127.0.0.1"; "-" when it cannot be printed
};

// A listening TCP socket on bind:port with SO_REUSEADDR (and SO_REUSEPORT when reuse_port, so
// that each event loop can own one and the kernel spreads connections over them), non-blocking
// and close-on-exec, with a backlog sized for thousands of pending connections (the kernel caps
// it at net.core.somaxconn). Throws std::system_error naming the address.
int listen_tcp(const std::string& bind, std::uint16_t port, bool reuse_port);

std::uint16_t local_port(int fd);  // the port a socket is bound to (after binding port 0)

// The largest open-file limit the process may have: raises the soft RLIMIT_NOFILE to the hard one
// and returns it.
std::uint64_t raise_fd_limit();

}  // namespace spoold
