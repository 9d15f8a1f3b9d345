// spool/detail/future_state.hpp: the shared state between a submitted task and its future, and
// the continuations that wait for it. Internal: users see spool::future<T>.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "spool/detail/work_item.hpp"
#include "spool/error.hpp"
#include "spool/priority.hpp"

namespace spool {
template <class T>
class future;
template <class T>
class shared_future;
}  // namespace spool

namespace spool::detail {

template <class T>
struct future_access;  // spool/detail/future_access.hpp
class state_base;

// ---- Continuations ----
// What waits in a state's list until the state is ready: then's task, when_all's arrivals, a
// coroutine's resumption. complete() calls on_ready() once on each, on the completing thread
// (or the registering one, if the state was ready already); the continuation then runs its work
// there (run_here) or hands itself to its pool as a task (dispatch). A continuation is a task,
// so that one object, one vtable pointer and one link (work_item::next: in a state's list, then in
// run_here's queue or a pool's) serve both; the states are continuations too (state_base), so a
// then() link is a single object. Every continuation's task operations must be callable: one
// that never enters a pool says so in run/cancel/destroy.
class continuation : public work_item {
 public:
  // The state it waited for is ready. Called once.
  virtual void on_ready() noexcept { std::terminate(); }  // a state that is not a continuation
  // The work, on the calling thread (run_here calls it).
  virtual void run_inline() noexcept { std::terminate(); }

 protected:
  continuation() = default;
  ~continuation() = default;
};

// Runs c->run_inline() on this thread in constant stack: if this thread is already inside
// run_here (a continuation that completes a state whose continuations run here too), c is
// queued and the outermost call runs it after the current one, in order. So a chain of any
// length finishes without growing the stack.
void run_here(continuation* c) noexcept;
// Where a continuation goes to run as a task: submitted to `where` at priority p; run here
// instead if `where` has no pool, refuses it (shut down, or full with reject), or has been
// destroyed.
void dispatch(pool_ref where, priority p, continuation* c) noexcept;
// Submits t to `where` from any thread: as core::submit (t is queued, or destroyed and the
// refusal returned), and errc::shut_down (t destroyed) if the pool is gone.
std::error_code submit_task(pool_ref where, priority p, work_item* t) noexcept;
// The pool whose task the calling thread runs: its worker's pool, or the pool of a task an
// outside thread runs (its own task taken back, caller_runs); no pool elsewhere.
pool_ref running_pool() noexcept;

// States whose cancellation a cancelled state passes on (then's source, when_all's inputs),
// one reference each; state_base::request_cancel walks them without recursion.
class cancel_walk {
 public:
  cancel_walk() = default;
  cancel_walk(const cancel_walk&) = delete;
  cancel_walk& operator=(const cancel_walk&) = delete;
  ~cancel_walk();
  // Takes over one reference to s.
  void add(state_base* s) noexcept;
  state_base* next() noexcept;

 private:
  std::vector<state_base*> pending_;
};

// ---- The shared state ----
// The state is itself a task (one vtable pointer for both), because the common state is a
// submitted task's: future_task keeps the work and the result in one block of task memory.
// States that are never queued (promise, when_all, when_any) derive from unqueued_state.
//
// Layout, and why it matters: task memory comes in power-of-two size classes
// (src/memory/size_classes.hpp), and a future's cost on the submit path follows its block
// size, so the fields are ordered to fill the task's tail: after task's vtable pointer, link
// and 4-byte region come the status word, the reference count and the pool's stamp (32 bits
// each), then the pointers. Every flag lives in the status word. future_task<int> around a
// callable of up to 8 bytes takes 64 bytes; tests/test_future_layout asserts it.
//
// The completion protocol lives in src/api/future_state.cpp: `status_` gains k_ready exactly
// once; waiters announce themselves with flag bits so the completer knows whom to wake (a
// futex wake for outside threads, the pool's parker for workers that help while waiting).
class state_base : public continuation {
 public:
  static constexpr std::uint32_t k_ready = 1;
  static constexpr std::uint32_t k_waited_outside = 2;  // a non-worker thread sleeps on status_
  static constexpr std::uint32_t k_waited_worker = 4;   // a worker sleeps in the pool's parker
  static constexpr std::uint32_t k_claimed = 8;         // see try_claim
  static constexpr std::uint32_t k_own_task = 16;       // the outside waiter may run it
  static constexpr std::uint32_t k_value = 32;          // the result slot holds a value
  static constexpr std::uint32_t k_failure = 64;        // ... an exception
  // The state is a queued task of its pool (future_task, delayed_task): the pool's shutdown
  // makes it ready before the pool goes, so a wait on it needs no pin (src/lifetime/).
  static constexpr std::uint32_t k_bound = 128;

  explicit state_base(pool_ref owner) noexcept : stamp_(owner.stamp), owner_(owner.owner) {}
  virtual ~state_base() = default;

  bool ready() const noexcept { return (status_.load(std::memory_order_acquire) & k_ready) != 0; }

  // Blocks until ready. On a worker of the owning pool it runs other tasks meanwhile.
  void wait() noexcept;
  // As wait(), up to a deadline; returns ready().
  bool wait_until(std::chrono::steady_clock::time_point deadline) noexcept;

  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // Adds a reference (shared_future copies, continuations that read the value later).
  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }

  // Sets k_waited_worker; returns true if the state was already ready (then nothing was set).
  bool mark_waited_by_worker() noexcept;
  // The waiter will not take the task back (state_base::wait): the library's own one-task
  // submissions from outside (an algorithm's whole run), which must run on a worker.
  void keep_on_workers() noexcept { status_.fetch_and(~k_own_task, std::memory_order_relaxed); }
  pool_ref owner() const noexcept { return {owner_, stamp_}; }
  // Ready, with an exception as its result.
  bool failed() const noexcept {
    return (status_.load(std::memory_order_acquire) & (k_ready | k_failure)) ==
           (k_ready | k_failure);
  }

  // ---- Cancelling (future::cancel) ----
  // The task's start and its cancellation race for one claim: run() takes it before it calls
  // the work, and future::cancel() or the pool's drop takes it before completing the future
  // with task_cancelled. Exactly one wins (a compare-and-swap on the status word, which never
  // loses k_claimed once set: complete() sets it too); the loser touches neither the callable
  // nor the result, only drops its reference. So the callable is destroyed once, by the
  // winner, and the memory once, by the last of the references.
  bool try_claim() noexcept {
    std::uint32_t s = status_.load(std::memory_order_relaxed);
    do {
      if ((s & (k_claimed | k_ready)) != 0) return false;
    } while (!status_.compare_exchange_weak(s, s | k_claimed, std::memory_order_acq_rel,
                                            std::memory_order_relaxed));
    return true;
  }
  bool claimed() const noexcept {
    return (status_.load(std::memory_order_acquire) & k_claimed) != 0;
  }
  // future::cancel(): true if the work had not started and now never will (its future then
  // reports task_cancelled); passes the cancellation on to what this state waits for (then's
  // source, when_all's inputs) that has not started either.
  bool request_cancel() noexcept;
  // Cancels what `up` holds and what that passes on, without recursion (request_cancel's walk,
  // for the states that cancel their inputs on their own: a when_all timing out).
  static void cancel_all(cancel_walk& up) noexcept;

  // ---- Continuations (then, when_all, when_any, co_await; src/api/future_state.cpp) ----
  // Calls c->on_ready() once the state is ready: at once if it is ready now, else when it
  // completes. Any number may be registered.
  void continue_with(continuation* c) noexcept;
  // As continue_with, but if the state is ready already, does nothing and returns false (a
  // coroutine then goes on without suspending).
  bool add_continuation(continuation* c) noexcept;

 protected:
  // What the result slot of state<R> holds; recorded by complete(), read after ready().
  enum class held : std::uint8_t { nothing, value, failure };

  // Publishes the result written before it (what `how` says it is) and wakes the waiters.
  // Called once, with the claim held if the state uses one.
  void complete(held how) noexcept;
  held holding() const noexcept {
    const std::uint32_t s = status_.load(std::memory_order_acquire);
    return (s & k_value) != 0 ? held::value : (s & k_failure) != 0 ? held::failure : held::nothing;
  }
  // Flags set before the state is published (k_own_task, k_bound).
  void set_flags(std::uint32_t flags) noexcept {
    status_.store(status_.load(std::memory_order_relaxed) | flags, std::memory_order_relaxed);
  }
  // Claims and completes this state as cancelled if it can (the work has not started); adds
  // what the cancellation passes on to `up`. See request_cancel.
  virtual bool cancel_here(cancel_walk&) noexcept { return false; }

 private:
  void wait_outside(const std::chrono::steady_clock::time_point* deadline) noexcept;

  // See the layout note above: three 32-bit words after work_item::isolation, then the pointers.
  std::atomic<std::uint32_t> status_{0};
  std::atomic<std::uint32_t> refs_{2};  // the task's and the future's
  const std::uint32_t stamp_;           // the owner's life this state was made in
  core* const owner_;
  // Continuations waiting for completion, newest first, linked through work_item::next; becomes a
  // closed marker when complete() takes them. See continue_with() in
  // future_state.cpp.
  std::atomic<continuation*> continuations_{nullptr};
};

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
    switch (holding()) {
      case held::value:
        value().~stored();
        break;
      case held::failure:
        failure().~exception_ptr();
        break;
      case held::nothing:
        break;
    }
  }

  // The result, moved out; a failure is rethrown (moved out too, so the state, which the
  // worker may free on its own thread, no longer shares the exception object). Called once.
  R take() {
    if (holding() == held::failure) std::rethrow_exception(std::move(failure()));
    if constexpr (std::is_reference_v<R>) {
      return *value();
    } else if constexpr (!std::is_void_v<R>) {
      return std::move(value());
    }
  }
  // The result without moving it out (shared_future); rethrows a failure each time.
  peek_type peek() const {
    if (holding() == held::failure) std::rethrow_exception(failure());
    if constexpr (std::is_reference_v<R>) {
      return *value();
    } else if constexpr (!std::is_void_v<R>) {
      return value();
    }
  }

  // Stores a value; complete(held::value) publishes it.
  template <class... A>
  void produce_value(A&&... args) {
    if constexpr (std::is_reference_v<R>) {
      ::new (static_cast<void*>(storage_)) stored(std::addressof(args)...);
    } else {
      ::new (static_cast<void*>(storage_)) stored(std::forward<A>(args)...);
    }
  }
  // Stores a failure; complete(held::failure) publishes it. No value may have been stored.
  void fail(std::exception_ptr e) noexcept {
    ::new (static_cast<void*>(storage_)) std::exception_ptr(std::move(e));
  }
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
  }
  // Publishes the value produced before (the claim, if any, is the caller's).
  void complete_value() noexcept { complete(held::value); }
  // The whole of completing with failure e (the claim, if any, is the caller's).
  void complete_failure(std::exception_ptr e) noexcept {
    fail(std::move(e));
    complete(held::failure);
  }
  // Calls store(), which stores the value (produce, produce_value), and completes with that
  // value or with what store() threw (the claim, if any, is the caller's). Always inlined into
  // the caller, whose code it is.
  template <class Store>
  [[gnu::always_inline]] void complete_from(Store&& store) noexcept {
    std::exception_ptr failure;
    try {
      store();
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure) {
      complete_failure(std::move(failure));
    } else {
      complete(held::value);
    }
  }

 protected:
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
    held how = held::value;
    try {
      produce(fn);
    } catch (...) {
      fail(std::current_exception());
      how = held::failure;
    }
    fn.~F();
    complete(how);
    release();
    return how == held::value ? outcome::completed : outcome::failed;
  }
  // The claim is won and fn will never run: destroys it and completes with failure e.
  template <class F>
  void complete_unrun(F& fn, std::exception_ptr e) noexcept {
    fn.~F();
    complete_failure(std::move(e));
  }
  // The task will never run (dropped by the pool, or refused): unless its future cancelled it
  // first, completes with failure e; then drops the task's reference.
  template <class F>
  void drop_unrun(F& fn, std::exception_ptr e) noexcept {
    if (try_claim()) complete_unrun(fn, std::move(e));
    release();
  }
  // A cancellation reached the task before it started (cancel_here): claims it, destroys fn
  // and completes with task_cancelled. False if the task was claimed already.
  template <class F>
  bool cancel_unrun(F& fn) noexcept {
    if (!try_claim()) return false;
    complete_unrun(fn, std::make_exception_ptr(task_cancelled()));
    return true;
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
  future_task(pool_ref owner, G&& fn) : state<R>(owner), name_(name_of(fn)) {
    ::new (static_cast<void*>(&fn_)) F(std::forward<G>(fn));
    this->set_flags(state_base::k_own_task | state_base::k_bound);
  }
  ~future_task() override {}  // fn_ is destroyed by run(), cancel() or destroy()

  outcome run(core&) noexcept override { return this->run_claimed(fn_); }

  void cancel() noexcept override {
    this->drop_unrun(fn_, std::make_exception_ptr(task_cancelled()));
  }

  // Refused before anyone saw it: drop both references (the future is never handed out).
  void destroy() noexcept override {
    fn_.~F();
    this->release();
    this->release();
  }
  const char* name() const noexcept override { return name_.get(); }

 protected:
  bool cancel_here(cancel_walk&) noexcept override { return this->cancel_unrun(fn_); }

 private:
  union {
    F fn_;
  };
  [[no_unique_address]] name_slot<F> name_;
};

// ---- Continuations: promises and then() ----

// The state behind spool::promise: completed from outside any task. Starts with two
// references, the promise's and the future's. Its future's cancel() claims it, completes it
// with task_cancelled, and makes a later set_value or set_exception do nothing.
template <class R>
class promise_state final : public unqueued_state<R> {
 public:
  using unqueued_state<R>::unqueued_state;
  // Stores the value and completes; false if the future was cancelled (nothing stored). A
  // throwing constructor of the value makes that exception the result (published after the
  // handler has ended: see detail/coro_task.hpp's run_root).
  template <class... A>
  bool set_value(A&&... args) noexcept {
    if (!this->try_claim()) return false;
    this->complete_from([&] { this->produce_value(std::forward<A>(args)...); });
    return true;
  }
  bool set_exception(std::exception_ptr e) noexcept {
    if (!this->try_claim()) return false;
    this->complete_failure(std::move(e));
    return true;
  }

 protected:
  bool cancel_here(cancel_walk&) noexcept override {
    return set_exception(std::make_exception_ptr(task_cancelled()));
  }
};

// ---- then(), then_try(), then_error() ----

template <class T>
struct is_future : std::false_type {};
template <class T>
struct is_future<spool::future<T>> : std::true_type {};
// What a continuation that returns Out gives: Out itself, or U when Out is future<U>
// (unwrapping: the continuation's future completes when the returned one does).
template <class Out>
struct unwrapped {
  using type = Out;
};
template <class U>
struct unwrapped<spool::future<U>> {
  using type = U;
};

// then(f): how f is called with the source's value. f takes the value as take() gives it (an
// rvalue of T, T& for a reference future, nothing for void) or, for a shared source, as peek()
// gives it (const T&); an f that takes only T& gets an lvalue of the moved-out value.
template <class Src, class F, bool Shared>
struct value_call {
  using arg =
      std::conditional_t<Shared, typename state<Src>::peek_type, std::add_rvalue_reference_t<Src>>;
  static constexpr bool by_rvalue = [] {
    if constexpr (std::is_void_v<Src>) {
      return std::is_invocable_v<F>;
    } else {
      return std::is_invocable_v<F, arg>;
    }
  }();
  static constexpr bool by_lvalue = [] {
    if constexpr (Shared || std::is_void_v<Src> || std::is_reference_v<Src> || by_rvalue) {
      return false;
    } else {
      return std::is_invocable_v<F, Src&>;
    }
  }();
  static constexpr bool ok = by_rvalue || by_lvalue;
  static auto out_tag() {
    if constexpr (std::is_void_v<Src> && by_rvalue) {
      return std::type_identity<std::invoke_result_t<F>>{};
    } else if constexpr (by_rvalue) {
      return std::type_identity<std::invoke_result_t<F, arg>>{};
    } else if constexpr (by_lvalue) {
      return std::type_identity<std::invoke_result_t<F, Src&>>{};
    } else {
      return std::type_identity<void>{};
    }
  }
  using out = typename decltype(out_tag())::type;

  static out call(F& f, state<Src>*& source) {
    if constexpr (std::is_void_v<Src>) {
      read(*source);
      return std::invoke(std::move(f));
    } else if constexpr (by_rvalue) {
      return std::invoke(std::move(f), read(*source));
    } else {
      Src value = source->take();
      return std::invoke(std::move(f), value);
    }
  }
  static decltype(auto) read(state<Src>& s) {
    if constexpr (Shared) {
      return s.peek();
    } else {
      return s.take();
    }
  }
};

// then_try(f): f receives the ready source itself, as a future (a shared_future for a shared
// source), and reads the value or the exception from it.
template <class Src, class F, bool Shared>
struct outcome_call {
  using handle = std::conditional_t<Shared, spool::shared_future<Src>, spool::future<Src>>;
  static constexpr bool ok = std::is_invocable_v<F, handle>;
  static auto out_tag() {
    if constexpr (ok) {
      return std::type_identity<std::invoke_result_t<F, handle>>{};
    } else {
      return std::type_identity<void>{};
    }
  }
  using out = typename decltype(out_tag())::type;

  // A unique source's reference moves into the handle (source becomes null); a shared one's
  // handle takes a reference of its own.
  static out call(F& f, state<Src>*& source) {
    if constexpr (Shared) {
      source->add_ref();
      return std::invoke(std::move(f), future_access<Src>::make_shared(source));
    } else {
      return std::invoke(std::move(f), future_access<Src>::make(std::exchange(source, nullptr)));
    }
  }
};

// The one parameter type of a callable that is not generic (its operator() or a function);
// no `type` for anything else.
template <class M>
struct parameter_of {};
template <class C, class R, class A>
struct parameter_of<R (C::*)(A)> {
  using type = A;
};
template <class C, class R, class A>
struct parameter_of<R (C::*)(A) const> {
  using type = A;
};
template <class C, class R, class A>
struct parameter_of<R (C::*)(A) noexcept> {
  using type = A;
};
template <class C, class R, class A>
struct parameter_of<R (C::*)(A) const noexcept> {
  using type = A;
};
template <class R, class A>
struct parameter_of<R (*)(A)> {
  using type = A;
};
template <class R, class A>
struct parameter_of<R (*)(A) noexcept> {
  using type = A;
};
template <class F, class = void>
struct sole_parameter : parameter_of<F> {};
template <class F>
struct sole_parameter<F, std::void_t<decltype(&F::operator())>>
    : parameter_of<decltype(&F::operator())> {};

template <class F, class = void>
struct caught_type {
  using type = void;  // not deducible: then_error reports it
};
template <class F>
struct caught_type<F, std::void_t<typename sole_parameter<F>::type>> {
  using type = std::remove_cvref_t<typename sole_parameter<F>::type>;
};
template <class G>
struct caught_type<named_fn<G>> : caught_type<G> {};  // spool::named(name, handler)

// then_error(f): f is called only if the source failed, with the exception: as a
// std::exception_ptr if it takes one, else as the exception type its one parameter names
// (another type passes through unchanged). A value passes through without calling f.
template <class Src, class F, bool Shared>
struct error_call {
  static constexpr bool any = std::is_invocable_v<F, std::exception_ptr>;
  using caught = std::conditional_t<any, std::exception_ptr, typename caught_type<F>::type>;
  static constexpr bool ok = [] {
    if constexpr (any) {
      return true;
    } else if constexpr (std::is_void_v<caught>) {
      return false;
    } else {
      return std::is_invocable_v<F, caught&>;
    }
  }();
  static auto out_tag() {
    if constexpr (any) {
      return std::type_identity<std::invoke_result_t<F, std::exception_ptr>>{};
    } else if constexpr (ok) {
      return std::type_identity<std::invoke_result_t<F, caught&>>{};
    } else {
      return std::type_identity<void>{};
    }
  }
  using out = typename decltype(out_tag())::type;
  // What f returns must give the source's type: that type, something convertible to it (void
  // for a void source), or a future of it.
  static constexpr bool returns_source_type =
      std::is_same_v<typename unwrapped<out>::type, Src> ||
      (!std::is_void_v<Src> && !is_future<out>::value && std::is_convertible_v<out, Src>);

  static out call(F& f, state<Src>*& source) {
    if constexpr (any) {
      std::exception_ptr e;
      try {
        value_call<Src, F, Shared>::read(*source);
      } catch (...) {
        e = std::current_exception();
      }
      return std::invoke(std::move(f), std::move(e));
    } else {
      try {
        value_call<Src, F, Shared>::read(*source);
      } catch (caught& e) {
        return std::invoke(std::move(f), e);
      }
      std::terminate();  // a failed source always throws from read()
    }
  }
};

enum class then_kind : unsigned char { value, outcome, error };

template <class Src, class F, bool Shared, then_kind Kind>
using then_call =
    std::conditional_t<Kind == then_kind::value, value_call<Src, F, Shared>,
                       std::conditional_t<Kind == then_kind::outcome, outcome_call<Src, F, Shared>,
                                          error_call<Src, F, Shared>>>;

// What then(f), then_try(f) or then_error(f) returns a future of.
template <class Src, class F, bool Shared, then_kind Kind>
using then_result_t =
    std::conditional_t<Kind == then_kind::error, Src,
                       typename unwrapped<typename then_call<Src, F, Shared, Kind>::out>::type>;

// A continuation that computes f(source) into a state of its own, for then, then_try and
// then_error on futures and shared_futures. It holds one reference to the source, which it
// drops once f has run or been dropped. It runs on its pool (the state's owner) at its
// priority, or, made inline, on the thread that completes the source. If f returns a
// future, the state completes when that one does (a forwarder waits on it).
template <class Src, class F, class R, bool Shared, then_kind Kind>
class then_task final : public state<R> {
  using call = then_call<Src, F, Shared, Kind>;

 public:
  template <class G>
  then_task(state<Src>* source, pool_ref where, priority p, bool run_inline, G&& fn)
      : state<R>(where), source_(source), prio_(p), inline_(run_inline), name_(name_of(fn)) {
    ::new (static_cast<void*>(&fn_)) F(std::forward<G>(fn));
  }
  ~then_task() override {}  // fn_ is destroyed by fire() or a cancellation

  void on_ready() noexcept override {
    if (inline_) {
      run_here(this);
    } else {
      dispatch(this->owner(), prio_, this);
    }
  }
  void run_inline() noexcept override { (void)fire(); }
  outcome run(core&) noexcept override { return fire(); }
  const char* name() const noexcept override { return name_.get(); }

  // Dropped unrun by a discarding shutdown: report cancellation, as a dropped task does.
  void cancel() noexcept override {
    if (this->try_claim()) drop_fn(true);
    this->release();
  }
  // A continuation: a refused submission runs it instead (dispatch).
  void destroy() noexcept override {}

 protected:
  bool cancel_here(cancel_walk& up) noexcept override {
    if (!this->try_claim()) return false;
    state_base* source = std::exchange(source_, nullptr);
    drop_fn(false);
    if (Shared) {
      source->release();  // other readers may still want it
    } else {
      up.add(source);
    }
    return true;
  }

 private:
  // Claims, calls f, stores what it gives and completes (or, for a returned future, leaves
  // the completion to the forwarder); drops the source's and the task's references.
  outcome fire() noexcept {
    if (!this->try_claim()) {  // cancelled while it waited
      this->release();
      return outcome::cancelled;
    }
    std::exception_ptr failure;
    try {
      if constexpr (Kind == then_kind::error) {
        if (source_->failed()) {
          store([this]() -> decltype(auto) { return call::call(fn_, source_); });
        } else {
          store([this]() -> decltype(auto) { return value_call<Src, F, Shared>::read(*source_); });
        }
      } else {
        store([this]() -> decltype(auto) { return call::call(fn_, source_); });
      }
    } catch (...) {
      failure = std::current_exception();
    }
    fn_.~F();
    if (source_ != nullptr) std::exchange(source_, nullptr)->release();
    if (failure) {
      this->complete_failure(std::move(failure));
      this->release();
      return outcome::failed;
    }
    if (inner_ != nullptr) {  // completes when the returned future does
      inner_->continue_with(&forwarder_);
      return outcome::completed;
    }
    this->complete(state_base::held::value);
    this->release();
    return outcome::completed;
  }

  // Stores g()'s result, or, if it is a future, takes its state to forward from.
  template <class G>
  void store(G g) {
    using out = decltype(g());
    if constexpr (is_future<std::remove_cvref_t<out>>::value &&
                  !std::is_same_v<std::remove_cvref_t<out>, R>) {
      std::remove_cvref_t<out> inner = g();
      if (!inner.valid()) {
        throw error(errc::invalid_argument, "spool: a continuation returned an empty future");
      }
      inner_ = future_access<R>::release(inner);
    } else {
      this->produce(g);
    }
  }

  // The returned future is ready: its result becomes this state's.
  void forward() noexcept {
    state<R>* inner = std::exchange(inner_, nullptr);
    std::exception_ptr failure;
    try {
      auto take = [inner]() -> decltype(auto) { return inner->take(); };
      this->produce(take);
    } catch (...) {
      failure = std::current_exception();
    }
    inner->release();
    if (failure) {
      this->complete_failure(std::move(failure));
    } else {
      this->complete(state_base::held::value);
    }
    this->release();
  }

  // The claim is ours and f will not run: complete with task_cancelled.
  void drop_fn(bool release_source) noexcept {
    fn_.~F();
    if (release_source && source_ != nullptr) std::exchange(source_, nullptr)->release();
    this->complete_failure(std::make_exception_ptr(task_cancelled()));
  }

  // Never enters a pool: it runs where the returned future completes (run_here).
  class forwarder final : public continuation {
   public:
    explicit forwarder(then_task& t) noexcept : t_(t) {}
    void on_ready() noexcept override { run_here(this); }
    void run_inline() noexcept override { t_.forward(); }
    outcome run(core&) noexcept override { std::terminate(); }
    void cancel() noexcept override { std::terminate(); }
    void destroy() noexcept override { std::terminate(); }

   private:
    then_task& t_;
  };

  state<Src>* source_;
  state<R>* inner_ = nullptr;
  forwarder forwarder_{*this};
  const priority prio_;
  const bool inline_;
  [[no_unique_address]] name_slot<F> name_;
  union {
    F fn_;
  };
};

}  // namespace spool::detail
