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

class continuation_task;

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

  // ---- Continuations (then, when_all, when_any, co_await; src/api/future_state.cpp) ----
  // Adds a reference (shared_future copies, continuations that read the value later).
  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Runs t on the owning pool once the state is ready: at once if it is ready now, else
  // when it completes. Any number may be registered.
  void continue_with(continuation_task* t) noexcept;
  // As continue_with, but if the state is ready already, does nothing and returns false (a
  // coroutine then goes on without suspending).
  bool add_continuation(continuation_task* t) noexcept;

 protected:
  // Publishes the result written before it and wakes the waiters. Called once.
  void complete() noexcept;
  // Moves the exception out, so the state (which the worker may free on its own thread) no
  // longer shares the exception object with the thread that rethrows it. Called once, by get().
  void rethrow_if_failed() {
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }
  // For shared_future, whose many readers each rethrow the same exception.
  void rethrow_if_failed_shared() const {
    if (failure_) std::rethrow_exception(failure_);
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
  // Continuations waiting for completion, newest first, linked through task::next; becomes
  // closed_list() when complete() takes them. See continue_with() in future_state.cpp.
  std::atomic<task*> continuations_{nullptr};
};

// ---- Continuations ----
// A task that runs when a future's state becomes ready. It is submitted to the state's pool
// like any task, with one difference: if the pool refuses it (shut down, or full with
// full_policy::reject), schedule_continuation() runs it on the calling thread instead, so
// a chain of continuations always finishes. destroy() therefore frees nothing: run() does.
class continuation_task : public task {
 public:
  void destroy() noexcept final {}

 protected:
  continuation_task() = default;
  ~continuation_task() = default;
};

// Submits t to owner's pool, or runs it on this thread if the pool refuses it.
void schedule_continuation(core* owner, continuation_task* t) noexcept;
// Submits t to owner's pool; on a refusal returns why and leaves t to the caller.
std::error_code submit_continuation(core* owner, continuation_task* t) noexcept;

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
  // The value without moving it out (shared_future); rethrows a failure each time.
  const R& peek() const {
    rethrow_if_failed_shared();
    return *std::launder(reinterpret_cast<const R*>(storage_));
  }
  template <class... A>
  void produce_value(A&&... args) {
    ::new (static_cast<void*>(storage_)) R(std::forward<A>(args)...);
    has_value_ = true;
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
  R& peek() const {
    rethrow_if_failed_shared();
    return *value_;
  }
  void produce_value(R& r) noexcept { value_ = std::addressof(r); }

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
  void peek() const { rethrow_if_failed_shared(); }
  // Completes a promise's state (see promise_state).
  void produce_value() noexcept {}

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

// ---- Continuations: promises and then() ----

// The state behind spool::promise: completed from outside any task. Starts with two
// references, the promise's and the future's.
template <class R>
class promise_state final : public state<R> {
 public:
  using state<R>::state;
  template <class... A>
  void set_value(A&&... args) {
    this->produce_value(std::forward<A>(args)...);
    this->complete();
  }
  void set_exception(std::exception_ptr e) noexcept {
    this->failure_ = std::move(e);
    this->complete();
  }
};

// What then(f) returns a future of: f(value), or f() for a void source.
template <class Src, class F>
struct then_result {
  using type = std::invoke_result_t<F, Src>;
};
template <class F>
struct then_result<void, F> {
  using type = std::invoke_result_t<F>;
};

// A continuation that computes fn(source's value) into a state of its own, for
// future::then and shared_future::then. It holds one reference to the source, which it
// releases once fn has run (or been dropped). A failed source rethrows from take()/peek()
// before fn is called, so the failure passes to this state unchanged.
template <class Src, class F, class R, bool Shared>
class then_task final : public continuation_task, public state<R> {
 public:
  template <class G>
  then_task(state<Src>* source, G&& fn) : state<R>(source->owner()), source_(source) {
    ::new (static_cast<void*>(&fn_)) F(std::forward<G>(fn));
  }
  ~then_task() override {}  // fn_ is destroyed by run() or cancel()

  outcome run(core&) noexcept override {
    outcome how = outcome::completed;
    try {
      auto call = [this]() -> decltype(auto) {
        if constexpr (std::is_void_v<Src>) {
          read();
          return std::invoke(std::move(fn_));
        } else {
          return std::invoke(std::move(fn_), read());
        }
      };
      this->produce(call);
    } catch (...) {
      this->failure_ = std::current_exception();
      how = outcome::failed;
    }
    finish();
    return how;
  }

  // Dropped unrun by a discarding shutdown: report cancellation, as a dropped task does.
  void cancel() noexcept override {
    this->failure_ = std::make_exception_ptr(task_cancelled());
    finish();
  }

 private:
  decltype(auto) read() {
    if constexpr (Shared) {
      return source_->peek();
    } else {
      return source_->take();
    }
  }
  void finish() noexcept {
    fn_.~F();
    source_->release();
    this->complete();
    this->release();
  }

  state<Src>* source_;
  union {
    F fn_;
  };
};

}  // namespace spool::detail
