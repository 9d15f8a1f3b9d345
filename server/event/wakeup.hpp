// One thread waking another that waits in poll() or epoll_wait(): an eventfd the waiting thread
// watches beside its other descriptors. signal() from any thread makes it readable; the waiting
// thread clears it with drain() once it has looked at what it was woken for. Signals that arrive
// before the drain coalesce into one wake-up, so a sender may signal once per batch.
#pragma once

namespace spoold {

class wakeup {
 public:
  wakeup();  // throws std::system_error naming eventfd
  ~wakeup();
  wakeup(const wakeup&) = delete;
  wakeup& operator=(const wakeup&) = delete;

  // For the waiting thread's poll() set or epoll set: readable once signalled.
  [[nodiscard]] int fd() const noexcept { return fd_; }
  // Any thread.
  void signal() const noexcept;
  // The waiting thread, after the descriptor was readable: not readable again until signalled.
  void drain() const noexcept;

 private:
  int fd_;
};

}  // namespace spoold
