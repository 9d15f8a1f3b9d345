#include "conn/transport.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace spoold {
namespace {

// The status of a call that returned `n` (< 0: errno says why). Interrupted calls are retried by
// the callers' loops.
io_result result_of(ssize_t n) noexcept {
  if (n > 0) return {io_status::ok, static_cast<std::size_t>(n)};
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return {io_status::again, 0};
  return {io_status::error, 0};
}

}  // namespace

void transport::set_nodelay() noexcept {
  int one = 1;
  (void)::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void transport::close() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
}

io_result socket_transport::read(char* into, std::size_t size) noexcept {
  for (;;) {
    const ssize_t n = ::recv(fd_, into, size, 0);
    if (n == 0) return {io_status::eof, 0};
    if (n < 0 && errno == EINTR) continue;
    return result_of(n);
  }
}

io_result socket_transport::peek(char* into, std::size_t size) noexcept {
  for (;;) {
    const ssize_t n = ::recv(fd_, into, size, MSG_PEEK);
    if (n == 0) return {io_status::eof, 0};
    if (n < 0 && errno == EINTR) continue;
    return result_of(n);
  }
}

io_result socket_transport::write(const char* from, std::size_t size, bool more) noexcept {
  const int flags = MSG_NOSIGNAL | (more ? MSG_MORE : 0);
  for (;;) {
    const ssize_t n = ::send(fd_, from, size, flags);
    if (n < 0 && errno == EINTR) continue;
    return result_of(n);
  }
}

io_result socket_transport::send_file(int file_fd, std::uint64_t& offset,
                                      std::size_t size) noexcept {
  for (;;) {
    off_t at = static_cast<off_t>(offset);
    const ssize_t n = ::sendfile(fd_, file_fd, &at, size);
    if (n < 0 && errno == EINTR) continue;
    // n == 0: the file ended early (it shrank under us): the promised length cannot be kept.
    if (n > 0) offset += static_cast<std::uint64_t>(n);
    return result_of(n);
  }
}

bool socket_transport::shutdown_write() noexcept { return ::shutdown(fd_, SHUT_WR) == 0; }

io_status read_away(transport& t) noexcept {
  char sink[4096];
  for (;;) {
    const io_result r = t.read(sink, sizeof sink);
    if (r.status != io_status::ok) return r.status;
  }
}

}  // namespace spoold
