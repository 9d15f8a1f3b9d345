// How a model tells everything that waits that the server is stopping: the threads of this
// process, and forked children, which share the pipe but not the flag.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace spoold {

using steady_clock = std::chrono::steady_clock;

// Milliseconds for poll() until `deadline`, rounded up so that the wake-up is not early.
int poll_timeout(steady_clock::time_point deadline, steady_clock::time_point now) noexcept;

// Two forms: a flag for the threads of this process, and a pipe whose read end reaches
// end-of-file once the stop is raised, so that it can sit in a poll() set beside a socket and so
// that forked children see it too. Only the parent holds the write end (a child drops its copy
// in enter_child), so a parent that dies also stops its children.
class stop_signal {
 public:
  stop_signal();  // throws std::system_error if no pipe can be made
  ~stop_signal();
  stop_signal(const stop_signal&) = delete;
  stop_signal& operator=(const stop_signal&) = delete;

  void raise() noexcept;  // idempotent
  // True once raised: one atomic load in the process that raises it. In a forked child this also
  // looks at the pipe (one poll() call) until it has seen the stop.
  [[nodiscard]] bool raised() const noexcept {
    if (raised_.load(std::memory_order_acquire)) return true;
    return child_ && pipe_closed();
  }
  // When the stop was raised; in a child, when it first saw it. steady_clock::now() before.
  [[nodiscard]] steady_clock::time_point raised_at() const noexcept;
  // Readable (POLLIN or POLLHUP) once raised.
  [[nodiscard]] int fd() const noexcept { return read_fd_; }
  // Sleeps until raised or `timeout` passes; true if raised.
  bool wait_for(std::chrono::milliseconds timeout) const noexcept;
  // Call first thing in a forked child: closes the inherited write end.
  void enter_child() noexcept;

 private:
  void note_raised() const noexcept;
  [[nodiscard]] bool pipe_closed() const noexcept;  // notes the stop if so

  int read_fd_ = -1;
  std::atomic<int> write_fd_{-1};  // -1 once raised (or in a child)
  bool child_ = false;
  mutable std::atomic<bool> raised_{false};
  mutable std::atomic<std::int64_t> raised_at_ns_{0};
};

}  // namespace spoold
