#include "net.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace spoold {
namespace {

[[noreturn]] void fail(int fd, const std::string& what) {
  int err = errno;
  if (fd >= 0) ::close(fd);
  throw std::system_error(err, std::generic_category(), what);
}

}  // namespace

std::string peer_address::text() const {
  char text[INET_ADDRSTRLEN] = {};
  if (storage.ss_family != AF_INET) return "-";
  const auto& in = reinterpret_cast<const sockaddr_in&>(storage);
  if (::inet_ntop(AF_INET, &in.sin_addr, text, sizeof text) == nullptr) return "-";
  return text;
}

int listen_tcp(const std::string& bind, std::uint16_t port, bool reuse_port) {
  const std::string where = bind + ":" + std::to_string(port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, bind.c_str(), &addr.sin_addr) != 1) {
    throw std::system_error(EINVAL, std::generic_category(), "not an IPv4 address: " + bind);
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(-1, "socket");
  int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) fail(fd, "SO_REUSEADDR");
  if (reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    fail(fd, "SO_REUSEPORT");
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    fail(fd, "bind " + where);
  }
  if (::listen(fd, 65535) != 0) fail(fd, "listen " + where);
  return fd;
}

std::uint16_t local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::system_error(errno, std::generic_category(), "getsockname");
  }
  if (addr.ss_family != AF_INET) return 0;
  return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
}

std::uint64_t raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur;
}

}  // namespace spoold
