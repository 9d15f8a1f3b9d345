// spool/future.hpp: the result of pool::submit().
#pragma once

#include <chrono>
#include <utility>

#include "spool/detail/future_state.hpp"
#include "spool/error.hpp"

namespace spool {

template <class T>
class future;

namespace detail {
// For the library's own layers (detail/parallel_support.hpp): a future whose get() must leave
// its task to the workers, never run it on the waiting thread.
struct future_access {
  template <class T>
  static void keep_on_workers(future<T>& f) noexcept;
};
}  // namespace detail

// Like std::future, with two differences that matter inside a pool:
//  - waiting from one of the owning pool's workers runs other queued tasks instead of
//    blocking the thread, so nested fork/join finishes even on a one-thread pool;
//  - waiting (get(), wait()) from the thread outside the pool that submitted the task runs
//    the task on that thread if no worker has taken it yet and it is the oldest task queued
//    in the thread's producer slot (an unbounded pool, priority::normal); otherwise the thread
//    waits for a worker. wait_for/wait_until never run it (src/README.md, "An outside waiter
//    runs its own task"). A task run so is not on a worker: this_worker_index() is -1, its
//    own waits block instead of helping, and wait_idle()/shutdown() from it report
//    errc::would_deadlock as on a worker;
//  - destroying a future never blocks.
// A task dropped before it ran (shutdown_mode::discard, full_policy::discard_oldest,
// cancel()) makes get() throw spool::task_cancelled.
template <class T>
class future {
 public:
  future() noexcept = default;
  future(future&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  future& operator=(future&& other) noexcept {
    if (this != &other) {
      reset();
      state_ = std::exchange(other.state_, nullptr);
    }
    return *this;
  }
  future(const future&) = delete;
  future& operator=(const future&) = delete;
  ~future() { reset(); }

  bool valid() const noexcept { return state_ != nullptr; }
  bool ready() const noexcept { return state_ != nullptr && state_->ready(); }

  void wait() const { checked().wait(); }

  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& timeout) const {
    return wait_until(std::chrono::steady_clock::now() + timeout);
  }
  template <class Clock, class Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& deadline) const {
    auto steady = std::chrono::steady_clock::now() + (deadline - Clock::now());
    return checked().wait_until(
        std::chrono::time_point_cast<std::chrono::steady_clock::duration>(steady));
  }

  // ---- Cancelling the task ----
  // Asks that the task never run. Returns true if it had not started and now never will:
  // the future is ready at once and get() throws spool::task_cancelled; the callable (and
  // what it captured) is destroyed before cancel() returns; the task is counted in
  // stats::cancelled when a worker next meets it in the queue (a submit_after task still
  // waiting for its deadline leaves the timer queue at once and is never counted: it never
  // entered the pool). Returns false if the task has started or finished, or was already
  // cancelled or dropped. A worker starting the task and cancel() race for one claim
  // (detail::state_base::try_claim), so exactly one of them wins. Throws
  // spool::error(errc::invalid_argument) on an empty future.
  bool cancel() { return checked().request_cancel(); }

  // Waits, then returns the value or rethrows the task's exception. Leaves the future empty.
  T get() {
    wait();
    detail::state<T>* s = std::exchange(state_, nullptr);
    struct releaser {
      detail::state<T>* s;
      ~releaser() { s->release(); }
    } guard{s};
    return s->take();
  }

 private:
  template <class>
  friend class future;
  friend class pool;
  friend struct detail::future_access;
  explicit future(detail::state<T>* s) noexcept : state_(s) {}

  detail::state<T>& checked() const {
    if (state_ == nullptr) throw error(errc::invalid_argument, "spool::future has no state");
    return *state_;
  }
  void reset() noexcept {
    if (state_ != nullptr) std::exchange(state_, nullptr)->release();
  }

  detail::state<T>* state_ = nullptr;
};

template <class T>
void detail::future_access::keep_on_workers(future<T>& f) noexcept {
  if (f.state_ != nullptr) f.state_->keep_on_workers();
}

}  // namespace spool
