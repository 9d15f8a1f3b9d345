// spool/future.hpp: the result of pool::submit(), and what composes results without blocking:
// future::then (and then_try, then_error, unwrapping), shared_future, promise, ready futures,
// when_all, when_any. Coroutines are in spool/coro.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spool/detail/callable.hpp"
#include "spool/detail/future_access.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/detail/timer.hpp"
#include "spool/detail/when.hpp"
#include "spool/error.hpp"
#include "spool/priority.hpp"

namespace spool {

class pool;
template <class T>
class shared_future;
template <class T>
class promise;

// Like std::future, with these differences that matter inside a pool:
//  - waiting from one of the owning pool's workers runs other queued tasks instead of
//    blocking the thread, so nested fork/join finishes even on a one-thread pool;
//  - waiting (get(), wait()) from the thread outside the pool that submitted the task runs
//    the task on that thread if no worker has taken it yet and it is the oldest task queued
//    in the thread's producer slot (a pool not discard_oldest, priority::normal); otherwise
//    the thread waits for a worker. wait_for/wait_until never run it (src/README.md, "An
//    outside waiter runs its own task"). A task run so is not on a worker: this_worker_index()
//    is -1, its own waits block instead of helping, and wait_idle()/shutdown() from it
//    report errc::would_deadlock as on a worker;
//  - destroying a future never blocks;
//  - a future may outlive its pool: what it holds stays valid, and a continuation attached
//    after the pool is gone runs on the thread that attaches it (as one the pool refuses).
// A task dropped before it ran (shutdown_mode::discard, full_policy::discard_oldest,
// cancel()) makes get() throw spool::task_cancelled.
template <class T>
class future {
 public:
  using value_type = T;
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

  // ---- Cancelling ----
  // Asks that the work behind this future never run. Returns true if it had not started and
  // now never will: the future is ready at once and get() throws spool::task_cancelled; the
  // callable (and what it captured) is destroyed before cancel() returns. Returns false if
  // the work has started or finished, or was already cancelled or dropped.
  //  - A submitted task is counted in stats::cancelled when a worker next meets it in the
  //    queue (a submit_after task still waiting for its deadline leaves the timer queue at
  //    once and is never counted: it never entered the pool). A worker starting the task and
  //    cancel() race for one claim (detail::state_base::try_claim), so exactly one wins.
  //  - then(), then_try(), then_error(): the continuation is cancelled if it has not started,
  //    and the cancellation passes on to its source (if that is a future, not a
  //    shared_future) and so up the chain, cancelling each link that has not started.
  //  - when_all and when_any: the result is cancelled, and so is every input that is a
  //    future and has not started.
  //  - a promise's future: completed with task_cancelled; a later set_value or set_exception
  //    is ignored (promise::cancelled() says so).
  //  - spool::start(): true if the coroutine has not started (it never will); a started one
  //    is cancelled through the stop token start() was given (spool/coro.hpp).
  // Throws spool::error(errc::invalid_argument) on an empty future.
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

  // ---- Continuations (spool/coro.hpp adds co_await) ----
  // then(f) returns the future of f(value), where f runs as a task on this future's pool once
  // this future is ready; no thread blocks in between. f takes the value (T, T&& or T&;
  // nothing for void). If this future failed or was cancelled, f is not called and the
  // returned future rethrows the same exception. If f returns a future<U>, the result is a
  // future<U> that completes when that one does (unwrapping). Leaves this future empty.
  //  - then(pool, f): f runs on `pool` instead, and the result belongs to it.
  //  - then(priority, f): f runs on this future's pool at that priority.
  //  - then_inline(f): f runs on the thread that completes this future (or, if it is ready
  //    already, on the calling thread), without a trip through the pool; keep such an f short
  //    and non-blocking. The result still belongs to this future's pool.
  // Where the pool refuses the continuation (it has shut down, or it is bounded with
  // full_policy::reject and full) or is gone, f runs on the thread that completes this future
  // (or attaches f). Either way a chain of continuations of any length runs in constant stack.
  // A future made without a pool (make_ready_future) runs plain then() continuations inline.
  // Errors: spool::error(errc::invalid_argument) for an empty future or a null function.
  template <class F>
  auto then(F&& f) {
    return chain<detail::then_kind::value>(own_pool(), priority::normal, false, std::forward<F>(f));
  }
  template <class F>
  auto then(pool& p, F&& f) {
    return chain<detail::then_kind::value>(detail::ref_of(p), priority::normal, false,
                                           std::forward<F>(f));
  }
  template <class F>
  auto then(priority p, F&& f) {
    return chain<detail::then_kind::value>(own_pool(), p, false, std::forward<F>(f));
  }
  template <class F>
  auto then_inline(F&& f) {
    return chain<detail::then_kind::value>(own_pool(), priority::normal, true, std::forward<F>(f));
  }

  // then_try(f): f receives this future, ready, whether it holds a value or an exception, and
  // may recover: its result (or the future it returns, unwrapped) is the result. get() on the
  // future it receives does not block.
  template <class F>
  auto then_try(F&& f) {
    return chain<detail::then_kind::outcome>(own_pool(), priority::normal, false,
                                             std::forward<F>(f));
  }
  template <class F>
  auto then_try(pool& p, F&& f) {
    return chain<detail::then_kind::outcome>(detail::ref_of(p), priority::normal, false,
                                             std::forward<F>(f));
  }

  // then_error(f): a future<T> with this future's value if it has one; otherwise f's result
  // for the exception. f takes std::exception_ptr (every exception), or one exception type
  // (`const E&`: only exceptions of that type or derived from it reach f; others pass
  // through unchanged). f returns a T (nothing for void), or a future<T>. The value path does
  // not call f (it still runs as a task on the pool; then_error(pool, f) chooses the pool).
  template <class F>
  auto then_error(F&& f) {
    return chain<detail::then_kind::error>(own_pool(), priority::normal, false, std::forward<F>(f));
  }
  template <class F>
  auto then_error(pool& p, F&& f) {
    return chain<detail::then_kind::error>(detail::ref_of(p), priority::normal, false,
                                           std::forward<F>(f));
  }

  // Turns this future into a shared one (copyable, many readers). Leaves this future empty.
  shared_future<T> share() noexcept { return shared_future<T>(std::exchange(state_, nullptr)); }

 private:
  template <class>
  friend class future;
  template <class>
  friend class shared_future;
  template <class>
  friend class promise;
  template <class>
  friend struct detail::future_access;
  friend class pool;
  explicit future(detail::state<T>* s) noexcept : state_(s) {}

  detail::state<T>& checked() const {
    if (state_ == nullptr) throw error(errc::invalid_argument, "spool::future has no state");
    return *state_;
  }
  detail::pool_ref own_pool() const { return checked().owner(); }
  void reset() noexcept {
    if (state_ != nullptr) std::exchange(state_, nullptr)->release();
  }

  template <detail::then_kind Kind, class F>
  auto chain(detail::pool_ref where, priority p, bool run_inline, F&& f);

  detail::state<T>* state_ = nullptr;
};

template <class T>
template <detail::then_kind Kind, class F>
auto future<T>::chain(detail::pool_ref where, priority p, bool run_inline, F&& f) {
  detail::state<T>& s = checked();
  detail::check_callable(f);
  state_ = nullptr;  // its reference goes to the continuation
  return detail::attach<T, false, Kind>(s, where, p, run_inline, std::forward<F>(f));
}

// ---- Continuations: shared_future, promise, when_all, when_any ----

// A future that many can read: copyable, get() returns a const reference (T& for a reference
// type, nothing for void) and may be called any number of times, from any number of threads;
// a failure is rethrown by every get(). Waiting behaves as future's does (help while waiting
// on a worker of the owning pool). Made by future::share().
template <class T>
class shared_future {
 public:
  using value_type = T;
  shared_future() noexcept = default;
  shared_future(const shared_future& other) noexcept : state_(other.state_) {
    if (state_ != nullptr) state_->add_ref();
  }
  shared_future(shared_future&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  shared_future& operator=(shared_future other) noexcept {
    std::swap(state_, other.state_);
    return *this;
  }
  ~shared_future() {
    if (state_ != nullptr) state_->release();
  }

  bool valid() const noexcept { return state_ != nullptr; }
  bool ready() const noexcept { return state_ != nullptr && state_->ready(); }
  void wait() const { checked().wait(); }
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& timeout) const {
    return checked().wait_until(std::chrono::steady_clock::now() +
                                std::chrono::duration_cast<std::chrono::nanoseconds>(timeout));
  }
  template <class Clock, class Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& deadline) const {
    auto steady = std::chrono::steady_clock::now() + (deadline - Clock::now());
    return checked().wait_until(
        std::chrono::time_point_cast<std::chrono::steady_clock::duration>(steady));
  }

  // Waits, then returns the value or rethrows the failure. The future stays valid.
  decltype(auto) get() const {
    wait();
    return state_->peek();
  }

  // As future's, but f receives the value as get() returns it (then), this shared_future
  // (then_try) or the exception (then_error), and this future stays valid: any number of
  // continuations may be attached. Cancelling one of them does not cancel this future (other
  // readers may want it).
  template <class F>
  auto then(F&& f) const {
    return chain<detail::then_kind::value>(own_pool(), priority::normal, false, std::forward<F>(f));
  }
  template <class F>
  auto then(pool& p, F&& f) const {
    return chain<detail::then_kind::value>(detail::ref_of(p), priority::normal, false,
                                           std::forward<F>(f));
  }
  template <class F>
  auto then(priority p, F&& f) const {
    return chain<detail::then_kind::value>(own_pool(), p, false, std::forward<F>(f));
  }
  template <class F>
  auto then_inline(F&& f) const {
    return chain<detail::then_kind::value>(own_pool(), priority::normal, true, std::forward<F>(f));
  }
  template <class F>
  auto then_try(F&& f) const {
    return chain<detail::then_kind::outcome>(own_pool(), priority::normal, false,
                                             std::forward<F>(f));
  }
  template <class F>
  auto then_error(F&& f) const {
    return chain<detail::then_kind::error>(own_pool(), priority::normal, false, std::forward<F>(f));
  }

 private:
  template <class>
  friend class future;
  template <class>
  friend struct detail::future_access;
  explicit shared_future(detail::state<T>* s) noexcept : state_(s) {}
  detail::state<T>& checked() const {
    if (state_ == nullptr) throw error(errc::invalid_argument, "spool::shared_future has no state");
    return *state_;
  }
  detail::pool_ref own_pool() const { return checked().owner(); }
  template <detail::then_kind Kind, class F>
  auto chain(detail::pool_ref where, priority p, bool run_inline, F&& f) const {
    detail::state<T>& s = checked();
    detail::check_callable(f);
    s.add_ref();  // the continuation's own reference
    return detail::attach<T, true, Kind>(s, where, p, run_inline, std::forward<F>(f));
  }
  detail::state<T>* state_ = nullptr;
};

// The writing end of a future that no task computes: completed from any thread by
// set_value() or set_exception(). Continuations attached to its future run on `p`; the pool
// may be destroyed before the promise is completed (continuations then run on the completing
// thread). A promise destroyed without a result completes its future with
// spool::task_cancelled (as a dropped task does). If the future is cancelled first
// (future::cancel), set_value and set_exception do nothing: cancelled() tells the producer it
// may stop. get_future() may be called once (again: errc::invalid_argument); setting twice,
// or after a move: invalid_argument.
template <class T>
class promise {
 public:
  explicit promise(pool& p);
  promise(promise&& other) noexcept
      : state_(std::exchange(other.state_, nullptr)), future_taken_(other.future_taken_) {}
  promise& operator=(promise other) noexcept {
    std::swap(state_, other.state_);
    std::swap(future_taken_, other.future_taken_);
    return *this;
  }
  promise(const promise&) = delete;
  ~promise() {
    if (state_ != nullptr) {
      detail::promise_state<T>* s = std::exchange(state_, nullptr);
      s->set_exception(std::make_exception_ptr(task_cancelled()));
      s->release();
    }
  }

  future<T> get_future() {
    if (state_ == nullptr || future_taken_)
      throw error(errc::invalid_argument, "spool::promise: no future to take");
    future_taken_ = true;
    state_->add_ref();
    return future<T>(state_);
  }
  // Completes the future with a value constructed from args (if that constructor throws,
  // its exception becomes the result).
  template <class... A>
  void set_value(A&&... args) {
    detail::promise_state<T>* s = take_state();
    s->set_value(std::forward<A>(args)...);
    s->release();
  }
  void set_exception(std::exception_ptr e) {
    if (!e) throw error(errc::invalid_argument, "spool::promise: null exception");
    detail::promise_state<T>* s = take_state();
    s->set_exception(std::move(e));
    s->release();
  }
  // The future has been cancelled (future::cancel): the result is no longer wanted, and
  // set_value or set_exception would do nothing.
  bool cancelled() const noexcept { return state_ != nullptr && state_->claimed(); }

 private:
  detail::promise_state<T>* take_state() {
    if (state_ == nullptr) throw error(errc::invalid_argument, "spool::promise: already set");
    return std::exchange(state_, nullptr);
  }
  // The state is created with two references: the promise's, and one handed to the future.
  // get_future() adds the future's; the constructor dropped the unused second one.
  detail::promise_state<T>* state_ = nullptr;
  bool future_taken_ = false;
};

// ---- Ready futures ----
// A future that is ready at once with a value (make_ready_future) or an exception
// (make_exceptional_future). Given a pool, its continuations run there as any future's do;
// without one, then() runs its continuation on the calling thread (then(pool, f) picks a
// pool). get() never blocks.
template <class T>
future<std::decay_t<T>> make_ready_future(T&& value) {
  return detail::ready_future<std::decay_t<T>>(detail::pool_ref{}, std::forward<T>(value));
}
template <class T>
future<std::decay_t<T>> make_ready_future(pool& p, T&& value) {
  return detail::ready_future<std::decay_t<T>>(detail::ref_of(p), std::forward<T>(value));
}
inline future<void> make_ready_future() { return detail::ready_future<void>(detail::pool_ref{}); }
inline future<void> make_ready_future(pool& p) {
  return detail::ready_future<void>(detail::ref_of(p));
}
template <class T>
future<T> make_exceptional_future(std::exception_ptr e) {
  return detail::exceptional_future<T>(detail::pool_ref{}, std::move(e));
}
template <class T>
future<T> make_exceptional_future(pool& p, std::exception_ptr e) {
  return detail::exceptional_future<T>(detail::ref_of(p), std::move(e));
}

// What when_any's future holds: the index of an input that was ready first, and all the
// inputs, in their order, handed back (inputs[index] is ready; get() it for its value).
template <class T>
struct when_any_result {
  std::size_t index = 0;
  std::vector<future<T>> futures;
};

// The variadic when_any's result: the same, with the inputs in a tuple.
template <class... T>
struct when_any_tuple_result {
  std::size_t index = 0;
  std::tuple<future<T>...> futures;
};

// A future of the values of every input (futures, moved in, or shared_futures, whose values
// are copied), ready once all of them are; if any input failed, it rethrows the exception of
// the first failed input in argument order. The result belongs to the first input's pool. A
// void input gives a std::monostate in its place, so positions in the tuple match positions
// in the call. An empty input: spool::error(errc::invalid_argument). Cancelling the result
// cancels the inputs that are futures and have not started.
template <detail::future_like F0, detail::future_like... F>
auto when_all(F0 first, F... rest) {
  return detail::when_all_of(nullptr, std::move(first), std::move(rest)...);
}

// The vector forms: a future of every value in input order (future<void> for void inputs),
// with the same failure rule; a vector of shared_futures copies the values. An empty vector
// or an empty future in it: spool::error(errc::invalid_argument).
template <detail::future_like F>
auto when_all(std::vector<F> in) {
  return detail::when_all_of(nullptr, std::move(in));
}

// A future that is ready once any input is: it holds the index of the input whose
// completion was seen first and every input handed back (see when_any_result). It never
// fails itself: a failed input counts as ready, and its get() rethrows. Inputs completing
// later are left in the returned futures. An empty vector or an empty future in it:
// spool::error(errc::invalid_argument). Cancelling the result (before an input is ready)
// cancels the inputs that have not started.
template <class T>
future<when_any_result<T>> when_any(std::vector<future<T>> in) {
  return detail::when_any_of(nullptr, std::move(in));
}

// The variadic form: the inputs come back in a tuple (see when_any_tuple_result).
template <class T0, class... T>
future<when_any_tuple_result<T0, T...>> when_any(future<T0> first, future<T>... rest) {
  return detail::when_any_of(nullptr, std::move(first), std::move(rest)...);
}

// ---- Deadlines ----
// when_all_for / when_all_until / when_any_for / when_any_until: as when_all and when_any
// (every form), with a deadline kept by the first input's pool's timer queue. If the result
// is not ready when the deadline passes, it fails with spool::error(errc::timed_out) and every
// input that is a future and has not started is cancelled (running ones finish; their results
// are dropped). A result settled before the deadline cancels its timer at once. If the pool
// shuts down before the deadline (its timers are dropped), the result times out then; if it
// cannot take the timer at all (shut down, or destroyed), the result fails at once with
// errc::shut_down. The first input must belong to a pool (not a make_ready_future without
// one): else spool::error(errc::invalid_argument).
template <class Rep, class Period, class... In>
auto when_all_for(const std::chrono::duration<Rep, Period>& timeout, In&&... inputs) {
  const detail::steady_deadline d =
      detail::deadline_after(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout));
  return detail::when_all_of(&d, std::forward<In>(inputs)...);
}
template <class Clock, class Duration, class... In>
auto when_all_until(const std::chrono::time_point<Clock, Duration>& deadline, In&&... inputs) {
  const detail::steady_deadline d = detail::to_steady(deadline);
  return detail::when_all_of(&d, std::forward<In>(inputs)...);
}
template <class Rep, class Period, class... In>
auto when_any_for(const std::chrono::duration<Rep, Period>& timeout, In&&... inputs) {
  const detail::steady_deadline d =
      detail::deadline_after(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout));
  return detail::when_any_of(&d, std::forward<In>(inputs)...);
}
template <class Clock, class Duration, class... In>
auto when_any_until(const std::chrono::time_point<Clock, Duration>& deadline, In&&... inputs) {
  const detail::steady_deadline d = detail::to_steady(deadline);
  return detail::when_any_of(&d, std::forward<In>(inputs)...);
}

template <class T>
promise<T>::promise(pool& p) : state_(new detail::promise_state<T>(detail::ref_of(p))) {
  state_->release();  // see state_: the future's reference is added by get_future()
}

}  // namespace spool
