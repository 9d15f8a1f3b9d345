#include "models/listener.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string_view>
#include <system_error>

#include "models/transport.hpp"

namespace spoold {
namespace {

constexpr std::string_view refused_response =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 33\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    "Too many connections; try again.\n";

}  // namespace

void listener::open(const options& o, std::uint16_t port, bool blocking, bool reuse_port) {
  close();
  fd_ = listen_tcp(o.bind, port, reuse_port);
  if (blocking) {
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      const int err = errno;
      close();
      throw std::system_error(err, std::generic_category(), "fcntl (blocking listener)");
    }
  }
  port_ = local_port(fd_);
}

accept_outcome listener::accept(accepted& out) noexcept {
  for (;;) {
    out.peer.length = sizeof out.peer.storage;
    out.fd = ::accept4(fd_, out.peer.data(), &out.peer.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (out.fd >= 0) return accept_outcome::accepted;
    switch (errno) {
      case EINTR:
      case ECONNABORTED:  // the client gave up while in the backlog
      case EPROTO:
      case EPERM:  // a firewall rule refused it
        continue;
      case EAGAIN:
        return accept_outcome::empty;
      case EMFILE:
      case ENFILE:
      case ENOBUFS:
      case ENOMEM:
        std::perror("spoold: accept4");
        return accept_outcome::exhausted;
      case EINVAL:  // shut down (blocking listeners), or not listening
        return accept_outcome::failed;
      default:
        std::perror("spoold: accept4");
        return accept_outcome::failed;
    }
  }
}

void listener::shut_down() noexcept {
  // On Linux, shutting a listening socket down takes it out of the LISTEN state and wakes every
  // accept() waiting on it, in this process and in every process sharing it.
  if (fd_ >= 0) (void)::shutdown(fd_, SHUT_RDWR);
}

void listener::close() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
}

void refuse_connection(server_context& ctx, accepted&& a) noexcept {
  if (a.fd < 0) return;
  socket_transport socket(a.fd);  // closes it
  a.fd = -1;
  (void)socket.write(refused_response.data(), refused_response.size(), false);
  ctx.counters.connection_refused();
  ctx.counters.record_response(503, refused_response.size());
}

}  // namespace spoold
