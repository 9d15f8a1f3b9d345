#include "models/blocking_model.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <system_error>

#include "net.hpp"

namespace spoold {
namespace {

constexpr auto accept_backoff = std::chrono::milliseconds(100);

void set_blocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) throw std::system_error(errno, std::generic_category(), "fcntl F_GETFL");
  if (::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw std::system_error(errno, std::generic_category(), "fcntl F_SETFL");
  }
}

enum class accept_outcome { accepted, retry, closed };

// accept() on a *blocking* listening socket; the new socket is non-blocking and close-on-exec.
// `closed` once the listening socket has been shut down (stop_listening), which also wakes
// every thread and process blocked in accept() on it. Out of descriptors, it sleeps 100 ms
// (or until the stop) and says `retry` rather than spin.
accept_outcome accept_connection(int listen_fd, const stop_signal& stop, int& fd,
                                 sockaddr_in& peer) {
  socklen_t len = sizeof peer;
  fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) return accept_outcome::accepted;
  switch (errno) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case EPERM:  // a firewall rule refused it
      return accept_outcome::retry;
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
      // Out of descriptors or memory: pending connections wait in the backlog meanwhile.
      std::perror("spoold: accept4");
      stop.wait_for(accept_backoff);
      return accept_outcome::retry;
    default:
      // EINVAL: shut down by stop_listening(); anything else is as final.
      if (errno != EINVAL) std::perror("spoold: accept4");
      return accept_outcome::closed;
  }
}

// Wakes every accept() blocked on `listen_fd` (they fail with EINVAL) and refuses new
// connections; the descriptor stays open until its owner closes it.
void stop_listening(int listen_fd) noexcept {
  // On Linux, shutting a listening socket down takes it out of the LISTEN state and wakes every
  // accept() waiting on it, in this process and in every process sharing it.
  if (listen_fd >= 0) (void)::shutdown(listen_fd, SHUT_RDWR);
}

}  // namespace

blocking_model::~blocking_model() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::uint16_t blocking_model::listen() {
  listen_fd_ = listen_tcp(ctx_.opts.bind, ctx_.opts.port, /*reuse_port=*/false);
  set_blocking(listen_fd_);
  return local_port(listen_fd_);
}

void blocking_model::start_log_flusher() { flusher_.emplace(ctx_.log); }

void blocking_model::stop() {
  stop_.raise();
  stop_listening(listen_fd_);
}

void blocking_model::wait() {
  join_threads();
  flusher_.reset();
}

void blocking_model::accept_loop(
    const std::function<void(int fd, const sockaddr_in& peer)>& on_accept, std::mutex* accept_mu) {
  while (!stop_.raised()) {
    int fd = -1;
    sockaddr_in peer{};
    accept_outcome got;
    if (accept_mu != nullptr) {
      std::lock_guard lock(*accept_mu);
      got = accept_connection(listen_fd_, stop_, fd, peer);
    } else {
      got = accept_connection(listen_fd_, stop_, fd, peer);
    }
    if (got == accept_outcome::closed) break;
    if (got == accept_outcome::accepted) on_accept(fd, peer);
  }
}

}  // namespace spoold
