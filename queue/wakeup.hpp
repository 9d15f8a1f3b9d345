// An eventfd to wake a thread that waits in poll(), on a Redis socket or on its own: signal()
// is async-signal-safe (one write), so a signal handler may use it.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <system_error>

namespace spool::queue::detail {

class wakeup {
 public:
  wakeup() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  }
  ~wakeup() { ::close(fd_); }
  wakeup(const wakeup&) = delete;
  wakeup& operator=(const wakeup&) = delete;

  void signal() noexcept {
    const std::uint64_t one = 1;
    while (::write(fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }
  // Consumes the signals so far (the fd is no longer readable until the next).
  void clear() noexcept {
    std::uint64_t n;
    while (::read(fd_, &n, sizeof n) < 0 && errno == EINTR) {
    }
  }
  // Waits up to `timeout` for a signal; true (and consumed) if one came.
  bool wait(std::chrono::milliseconds timeout) noexcept {
    pollfd p{fd_, POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const int n = ::poll(&p, 1, static_cast<int>(std::max<long long>(left.count(), 0)));
      if (n > 0) {
        clear();
        return true;
      }
      if (n == 0 || errno != EINTR) return false;
    }
  }
  [[nodiscard]] int fd() const noexcept { return fd_; }

 private:
  int fd_;
};

// Waits up to `timeout` for either; returns 1 if `a` was signalled, 2 if `b` was (consumed,
// but for `a`, which is left readable: for a stop signal that others watch too), 0 if neither.
inline int wait_either(const wakeup& a, wakeup& b, std::chrono::milliseconds timeout) noexcept {
  pollfd p[2] = {{a.fd(), POLLIN, 0}, {b.fd(), POLLIN, 0}};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const int n = ::poll(p, 2, static_cast<int>(std::max<long long>(left.count(), 0)));
    if (n > 0) {
      if (p[0].revents != 0) return 1;
      b.clear();
      return 2;
    }
    if (n == 0 || errno != EINTR) return 0;
  }
}

}  // namespace spool::queue::detail
