#include "event/stop_signal.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <system_error>

namespace spoold {
namespace {

std::int64_t to_ns(steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

int poll_timeout(steady_clock::time_point deadline, steady_clock::time_point now) noexcept {
  if (deadline <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<std::int64_t>(ms, std::numeric_limits<int>::max()));
}

stop_signal::stop_signal() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2 (stop signal)");
  }
  read_fd_ = fds[0];
  write_fd_.store(fds[1], std::memory_order_relaxed);
}

stop_signal::~stop_signal() {
  raise();
  ::close(read_fd_);
}

void stop_signal::raise() noexcept {
  // The flag and the time first, so that whoever wakes from the pipe finds them set.
  note_raised();
  // Exchange before close: a child forked meanwhile either finds -1 or a descriptor that was
  // still open when it was forked, never a number the parent has reused since (enter_child).
  const int fd = write_fd_.exchange(-1, std::memory_order_acq_rel);
  if (fd >= 0) ::close(fd);  // the read end reaches end-of-file for every process
}

void stop_signal::note_raised() const noexcept {
  if (raised_.load(std::memory_order_acquire)) return;
  raised_at_ns_.store(to_ns(steady_clock::now()), std::memory_order_relaxed);
  raised_.store(true, std::memory_order_release);
}

bool stop_signal::pipe_closed() const noexcept {
  // In a child the parent's flag is not ours: look at the pipe.
  pollfd p{read_fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0) {
    note_raised();
    return true;
  }
  return false;
}

steady_clock::time_point stop_signal::raised_at() const noexcept {
  if (!raised()) return steady_clock::now();
  return steady_clock::time_point(
      std::chrono::nanoseconds(raised_at_ns_.load(std::memory_order_relaxed)));
}

bool stop_signal::wait_for(std::chrono::milliseconds timeout) const noexcept {
  const auto until = steady_clock::now() + timeout;
  for (;;) {
    if (raised_.load(std::memory_order_acquire)) return true;
    pollfd p{read_fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, poll_timeout(until, steady_clock::now()));
    if (n > 0) {
      note_raised();
      return true;
    }
    if (n == 0 || errno != EINTR) return false;
  }
}

void stop_signal::enter_child() noexcept {
  child_ = true;
  const int fd = write_fd_.exchange(-1, std::memory_order_relaxed);
  if (fd >= 0) ::close(fd);
}

}  // namespace spoold
