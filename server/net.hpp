// Sockets shared by the server models.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

namespace spoold {

// A listening TCP socket on bind:port with SO_REUSEADDR (and SO_REUSEPORT when reuse_port, so
// that each event loop can own one and the kernel spreads connections over them), non-blocking
// and close-on-exec, with a backlog sized for thousands of pending connections (the kernel caps
// it at net.core.somaxconn). Throws std::system_error naming the address.
int listen_tcp(const std::string& bind, std::uint16_t port, bool reuse_port);

std::uint16_t local_port(int fd);  // the port a socket is bound to (after binding port 0)

std::string format_ipv4(const sockaddr_in& addr);  // "127.0.0.1"

// The largest open-file limit the process may have: raises the soft RLIMIT_NOFILE to the hard one
// and returns it.
std::uint64_t raise_fd_limit();

}  // namespace spoold
