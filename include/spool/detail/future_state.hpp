// spool/detail/future_state.hpp: the shared state between a submitted task and its future.
// Internal: users see spool::future<T>.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include "spool/detail/task.hpp"
#include "spool/error.hpp"

namespace spool::detail {

// The completion protocol lives in src/api/future_state.cpp: `status_` goes from pending to ready
// exactly once; waiters announce themselves with flag bits so the completer knows whom to wake
// (a futex wake for outside threads, the pool's parker for workers that help while waiting).
class state_base {
 public:
  static constexpr std::uint32_t k_ready = 1;
  static constexpr std::uint32_t k_waited_outside = 2;  // a non-worker thread sleeps on status_
  static constexpr std::uint32_t k_waited_worker = 4;   // a worker sleeps in the pool's parker

  explicit state_base(core* owner) noexcept : owner_(owner) {}
  virtual ~state_base() = default;
  state_base(const state_base&) = delete;
  state_base& operator=(const state_base&) = delete;

  bool ready() const noexcept { return (status_.load(std::memory_order_acquire) & k_ready) != 0; }

  // Blocks until ready. On a worker of the owning pool it runs other tasks meanwhile.
  void wait() noexcept;
  // As wait(), up to a deadline; returns ready().
  bool wait_until(std::chrono::steady_clock::time_point deadline) noexcept;

  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Sets k_waited_worker; returns true if the state was already ready (then nothing was set).
  bool mark_waited_by_worker() noexcept;
  // The waiter will not take the task back (state_base::wait): the library's own one-task
  // submissions from outside (an algorithm's whole run), which must run on a worker.
  void keep_on_workers() noexcept { own_task_ = nullptr; }
  core* owner() const noexcept { return owner_; }

  // ---- Cancelling one task (future::cancel) ----
  // The task's start and its cancellation race for one claim: run() takes it before it calls
  // the work, and future::cancel() or the pool's drop takes it before completing the future
  // with task_cancelled. Exactly one wins (a compare-and-swap on claim_); the loser touches
  // neither the callable nor the result, only drops its reference. So the callable is
  // destroyed once, by the winner, and the memory once, by the last of the two references.
  bool try_claim() noexcept {
    std::uint8_t unclaimed = 0;
    return claim_.compare_exchange_strong(unclaimed, 1, std::memory_order_acq_rel);
  }
  // future::cancel(): true if the task had not started and now never will (its future then
  // reports task_cancelled). States that are not a queued task's cannot be cancelled.
  virtual bool request_cancel() noexcept { return false; }

 protected:
  // Publishes the result written before it and wakes the waiters. Called once.
  void complete() noexcept;
  // Moves the exception out, so the state (which the worker may free on its own thread) no
  // longer shares the exception object with the thread that rethrows it. Called once, by get().
  void rethrow_if_failed() {
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

  std::exception_ptr failure_;
  // The task that completes this state when both are one object (future_task), for an outside
  // waiter that takes its own task back (core::run_own_task); null otherwise.
  task* own_task_ = nullptr;

 private:
  void wait_outside(const std::chrono::steady_clock::time_point* deadline) noexcept;

  std::atomic<std::uint32_t> status_{0};
  std::atomic<std::uint32_t> refs_{2};  // the task's and the future's
  std::atomic<std::uint8_t> claim_{0};  // see try_claim
  core* owner_;
};

// Storage for the result type R: values, references (held as pointers) and void.
template <class R>
class state : public state_base {
 public:
  using state_base::state_base;
  ~state() override {
    if (has_value_) value_ptr()->~R();
  }
  R take() {
    rethrow_if_failed();
    return std::move(*value_ptr());
  }

 protected:
  template <class F>
  void produce(F& fn) {
    ::new (static_cast<void*>(storage_)) R(std::invoke(fn));
    has_value_ = true;
  }

 private:
  R* value_ptr() noexcept { return std::launder(reinterpret_cast<R*>(storage_)); }
  alignas(R) unsigned char storage_[sizeof(R)];
  bool has_value_ = false;
};

template <class R>
class state<R&> : public state_base {
 public:
  using state_base::state_base;
  R& take() {
    rethrow_if_failed();
    return *value_;
  }

 protected:
  template <class F>
  void produce(F& fn) {
    value_ = std::addressof(std::invoke(fn));
  }

 private:
  R* value_ = nullptr;
};

template <>
class state<void> : public state_base {
 public:
  using state_base::state_base;
  void take() { rethrow_if_failed(); }

 protected:
  template <class F>
  void produce(F& fn) {
    std::invoke(fn);
  }
};

// A task and its future's state in one allocation. The callable is destroyed as soon as it
// has run (or is dropped), before the result is published, so whatever it captured is
// released by the time future::get() returns.
template <class F, class R>
class future_task final : public task, public state<R> {
 public:
  template <class G>
  future_task(core* owner, G&& fn) : state<R>(owner) {
    ::new (static_cast<void*>(&fn_)) F(std::forward<G>(fn));
    this->own_task_ = this;
  }
  ~future_task() override {}  // fn_ is destroyed by run(), cancel() or destroy()

  outcome run(core&) noexcept override {
    if (!this->try_claim()) {  // cancelled through its future while queued
      this->release();
      return outcome::cancelled;
    }
    outcome how = outcome::completed;
    try {
      this->produce(fn_);
    } catch (...) {
      this->failure_ = std::current_exception();
      how = outcome::failed;
    }
    fn_.~F();
    this->complete();
    this->release();
    return how;
  }

  void cancel() noexcept override {
    if (this->try_claim()) request_cancelled();
    this->release();
  }

  bool request_cancel() noexcept override {
    if (!this->try_claim()) return false;
    request_cancelled();
    return true;
  }

  // Refused before anyone saw it: drop both references (the future is never handed out).
  void destroy() noexcept override {
    fn_.~F();
    this->release();
    this->release();
  }

 private:
  // Won the claim without running: the future reports task_cancelled.
  void request_cancelled() noexcept {
    fn_.~F();
    this->failure_ = std::make_exception_ptr(task_cancelled());
    this->complete();
  }

  union {
    F fn_;
  };
};

}  // namespace spool::detail
