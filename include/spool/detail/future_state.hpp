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

// ---- The shared state ----
// The state is itself a task (one vtable pointer for both), because the common state is a
// submitted task's: future_task keeps the work and the result in one block of task memory.
// States that are never queued (promise, when_all, when_any) derive from unqueued_state.
//
// Layout, and why it matters: task memory comes in power-of-two size classes
// (src/memory/size_classes.hpp), and a future's cost on the submit path follows its block
// size, so the fields are ordered to fill the task's tail: after task's vtable pointer, link
// and 4-byte region come the two 32-bit counters and the one-byte flags, then the pointers.
// future_task<int> around a callable of up to 8 bytes takes 64 bytes; tests/test_future_layout
// asserts it.
//
// The completion protocol lives in src/api/future_state.cpp: `status_` goes from pending to ready
// exactly once; waiters announce themselves with flag bits so the completer knows whom to wake
// (a futex wake for outside threads, the pool's parker for workers that help while waiting).
class state_base : public task {
 public:
  static constexpr std::uint32_t k_ready = 1;
  static constexpr std::uint32_t k_waited_outside = 2;  // a non-worker thread sleeps on status_
  static constexpr std::uint32_t k_waited_worker = 4;   // a worker sleeps in the pool's parker

  explicit state_base(core* owner) noexcept : owner_(owner) {}
  virtual ~state_base() = default;

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
  void keep_on_workers() noexcept { own_task_ = false; }
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
  // A continuation is a task that runs when the state becomes ready. It is submitted to the
  // state's pool like any task, with one difference: if the pool refuses it (shut down, or
  // full with full_policy::reject), it runs on the calling thread instead, so a chain of
  // continuations always finishes. Its destroy() must therefore free nothing: run() does
  // (continuation_task, then_task).
  //
  // Adds a reference (shared_future copies, continuations that read the value later).
  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Runs t on the owning pool once the state is ready: at once if it is ready now, else
  // when it completes. Any number may be registered.
  void continue_with(task* t) noexcept;
  // As continue_with, but if the state is ready already, does nothing and returns false (a
  // coroutine then goes on without suspending).
  bool add_continuation(task* t) noexcept;

 protected:
  // What the result slot of state<R> holds; written before complete(), read after ready().
  enum class held : std::uint8_t { nothing, value, failure };

  // Publishes the result written before it and wakes the waiters. Called once.
  void complete() noexcept;
  // An outside waiter may take this state's task back and run it (future_task only).
  void allow_take_back() noexcept { own_task_ = true; }

 private:
  void wait_outside(const std::chrono::steady_clock::time_point* deadline) noexcept;

  // The first fields fill the 4 bytes after task::isolation and the ones after them (see
  // the layout note above); keep the small ones together before the pointers.
  std::atomic<std::uint32_t> status_{0};
  std::atomic<std::uint32_t> refs_{2};  // the task's and the future's
  std::atomic<std::uint8_t> claim_{0};  // see try_claim
  // This state is a future_task whose outside waiter may run it (core::run_own_task).
  bool own_task_ = false;

 protected:
  held held_ = held::nothing;

 private:
  core* owner_;
  // Continuations waiting for completion, newest first, linked through task::next; becomes
  // closed_list() when complete() takes them. See continue_with() in future_state.cpp.
  std::atomic<task*> continuations_{nullptr};
};

// A continuation that is not itself a state (when_all's arrivals, a coroutine's resumption).
class continuation_task : public task {
 public:
  void destroy() noexcept final {}

 protected:
  continuation_task() = default;
  ~continuation_task() = default;
};

// Submits t to owner's pool, or runs it on this thread if the pool refuses it.
void schedule_continuation(core* owner, task* t) noexcept;
// Submits t to owner's pool; on a refusal returns why and leaves t to the caller.
std::error_code submit_continuation(core* owner, task* t) noexcept;

template <class R>
struct peek_of {
  using type = const R&;
};
template <class R>
struct peek_of<R&> {
  using type = R&;
};
template <>
struct peek_of<void> {
  using type = void;
};

// The result slot for R: a value (a pointer for a reference, nothing for void) or the
// exception, never both, so they share storage.
template <class R>
class state : public state_base {
  struct none {};
  using stored = std::conditional_t<
      std::is_void_v<R>, none,
      std::conditional_t<std::is_reference_v<R>, std::remove_reference_t<R>*, R>>;

 public:
  using state_base::state_base;
  // What shared_future's readers get: const R&, R& for a reference, nothing for void.
  using peek_type = typename peek_of<R>::type;

  ~state() override {
    if (held_ == held::value) {
      value().~stored();
    } else if (held_ == held::failure) {
      failure().~exception_ptr();
    }
  }

  // The result, moved out; a failure is rethrown (moved out too, so the state, which the
  // worker may free on its own thread, no longer shares the exception object). Called once.
  R take() {
    if (held_ == held::failure) {
      std::exception_ptr e = std::move(failure());
      failure().~exception_ptr();
      held_ = held::nothing;
      std::rethrow_exception(std::move(e));
    }
    if constexpr (std::is_reference_v<R>) {
      return *value();
    } else if constexpr (!std::is_void_v<R>) {
      return std::move(value());
    }
  }
  // The result without moving it out (shared_future); rethrows a failure each time.
  peek_type peek() const {
    if (held_ == held::failure) std::rethrow_exception(failure());
    if constexpr (std::is_reference_v<R>) {
      return *value();
    } else if constexpr (!std::is_void_v<R>) {
      return value();
    }
  }

  template <class... A>
  void produce_value(A&&... args) {
    if constexpr (std::is_reference_v<R>) {
      ::new (static_cast<void*>(storage_)) stored(std::addressof(args)...);
    } else {
      ::new (static_cast<void*>(storage_)) stored(std::forward<A>(args)...);
    }
    held_ = held::value;
  }
  // Records a failure; no value may have been produced.
  void fail(std::exception_ptr e) noexcept {
    ::new (static_cast<void*>(storage_)) std::exception_ptr(std::move(e));
    held_ = held::failure;
  }

 protected:
  // Stores fn()'s result; an exception from fn (or from R's constructor) leaves the slot empty.
  template <class F>
  void produce(F& fn) {
    if constexpr (std::is_void_v<R>) {
      std::invoke(fn);
      ::new (static_cast<void*>(storage_)) stored();
    } else if constexpr (std::is_reference_v<R>) {
      ::new (static_cast<void*>(storage_)) stored(std::addressof(std::invoke(fn)));
    } else {
      ::new (static_cast<void*>(storage_)) stored(std::invoke(fn));
    }
    held_ = held::value;
  }

  // The whole run() of a task that computes fn() into this state (future_task, delayed_task):
  // claims the task, stores the result or the exception, destroys fn before the result is
  // published (so whatever it captured is released by the time get() returns), completes,
  // and drops the task's reference.
  template <class F>
  outcome run_claimed(F& fn) noexcept {
    if (!try_claim()) {  // cancelled through its future while queued
      release();
      return outcome::cancelled;
    }
    outcome how = outcome::completed;
    try {
      produce(fn);
    } catch (...) {
      fail(std::current_exception());
      how = outcome::failed;
    }
    fn.~F();
    complete();
    release();
    return how;
  }
  // The claim is won and fn will never run: destroys it and completes with failure e.
  template <class F>
  void complete_unrun(F& fn, std::exception_ptr e) noexcept {
    fn.~F();
    fail(std::move(e));
    complete();
  }
  // The task will never run (dropped by the pool, or refused): unless its future cancelled it
  // first, completes with failure e; then drops the task's reference.
  template <class F>
  void drop_unrun(F& fn, std::exception_ptr e) noexcept {
    if (try_claim()) complete_unrun(fn, std::move(e));
    release();
  }

 private:
  stored& value() noexcept { return *std::launder(reinterpret_cast<stored*>(storage_)); }
  const stored& value() const noexcept {
    return *std::launder(reinterpret_cast<const stored*>(storage_));
  }
  std::exception_ptr& failure() noexcept {
    return *std::launder(reinterpret_cast<std::exception_ptr*>(storage_));
  }
  const std::exception_ptr& failure() const noexcept {
    return *std::launder(reinterpret_cast<const std::exception_ptr*>(storage_));
  }

  alignas(stored) alignas(std::exception_ptr) unsigned char storage_
      [sizeof(stored) > sizeof(std::exception_ptr) ? sizeof(stored) : sizeof(std::exception_ptr)];
};

// A state that is completed by whoever holds it and never enters a queue (promise_state,
// when_all's and when_any's states): the task operations cannot be reached.
template <class R>
class unqueued_state : public state<R> {
 public:
  using state<R>::state;

 private:
  outcome run(core&) noexcept final { std::terminate(); }
  void cancel() noexcept final { std::terminate(); }
  void destroy() noexcept final { std::terminate(); }
};

// A task and its future's state in one allocation. The callable is destroyed as soon as it
// has run (or is dropped), before the result is published, so whatever it captured is
// released by the time future::get() returns.
template <class F, class R>
class future_task final : public state<R> {
 public:
  template <class G>
  future_task(core* owner, G&& fn) : state<R>(owner) {
    ::new (static_cast<void*>(&fn_)) F(std::forward<G>(fn));
    this->allow_take_back();
  }
  ~future_task() override {}  // fn_ is destroyed by run(), cancel() or destroy()

  outcome run(core&) noexcept override { return this->run_claimed(fn_); }

  void cancel() noexcept override {
    this->drop_unrun(fn_, std::make_exception_ptr(task_cancelled()));
  }

  bool request_cancel() noexcept override {
    if (!this->try_claim()) return false;
    this->complete_unrun(fn_, std::make_exception_ptr(task_cancelled()));
    return true;
  }

  // Refused before anyone saw it: drop both references (the future is never handed out).
  void destroy() noexcept override {
    fn_.~F();
    this->release();
    this->release();
  }

 private:
  union {
    F fn_;
  };
};

// ---- Continuations: promises and then() ----

// The state behind spool::promise: completed from outside any task. Starts with two
// references, the promise's and the future's.
template <class R>
class promise_state final : public unqueued_state<R> {
 public:
  using unqueued_state<R>::unqueued_state;
  template <class... A>
  void set_value(A&&... args) {
    this->produce_value(std::forward<A>(args)...);
    this->complete();
  }
  void set_exception(std::exception_ptr e) noexcept {
    this->fail(std::move(e));
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
class then_task final : public state<R> {
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
      this->fail(std::current_exception());
      how = outcome::failed;
    }
    finish();
    return how;
  }

  // Dropped unrun by a discarding shutdown: report cancellation, as a dropped task does.
  void cancel() noexcept override {
    this->fail(std::make_exception_ptr(task_cancelled()));
    finish();
  }
  // A continuation: a refused submission runs it instead (state_base::continue_with).
  void destroy() noexcept override {}

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
