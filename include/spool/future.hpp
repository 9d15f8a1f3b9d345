// spool/future.hpp: the result of pool::submit(), and what composes results without blocking:
// future::then (and then_try, then_error, unwrapping), shared_future, promise, ready futures,
// when_all, when_any. Coroutines are in spool/coro.hpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "spool/detail/callable.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/detail/timer.hpp"
#include "spool/error.hpp"
#include "spool/priority.hpp"

namespace spool {

class pool;
template <class T>
class shared_future;
template <class T>
class promise;
template <class T>
struct when_any_result;

namespace detail {
// The pool as futures refer to it (src/api/pool.cpp).
pool_ref ref_of(pool& p) noexcept;
// Library-internal access to a future's state.
template <class T>
struct future_access;

}  // namespace detail

// Like std::future, with these differences that matter inside a pool:
//  - waiting from one of the owning pool's workers runs other queued tasks instead of
//    blocking the thread, so nested fork/join finishes even on a one-thread pool;
//  - waiting (get(), wait()) from the thread outside the pool that submitted the task runs
//    the task on that thread if no worker has taken it yet and it is the oldest task queued
//    in the thread's producer slot (an unbounded pool, priority::normal); otherwise the thread
//    waits for a worker. wait_for/wait_until never run it (src/README.md, "An outside waiter
//    runs its own task"). A task run so is not on a worker: this_worker_index() is -1, its
//    own waits block instead of helping, and wait_idle()/shutdown() from it report
//    errc::would_deadlock as on a worker;
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

// ---- Continuations: shared_future, promise, when_all, when_any ----

namespace detail {
template <class T>
struct future_access {
  static state<T>& state_of(future<T>& f) noexcept { return *f.state_; }
  static state<T>& state_of(const shared_future<T>& f) noexcept { return *f.state_; }
  // A future or shared_future around s, taking over one reference.
  static future<T> make(state<T>* s) noexcept { return future<T>(s); }
  static shared_future<T> make_shared(state<T>* s) noexcept { return shared_future<T>(s); }
  // The state of f, with f's reference; f is left empty.
  static state<T>* release(future<T>& f) noexcept { return std::exchange(f.state_, nullptr); }
  // A future whose get() must leave its task to the workers, never run it on the waiting
  // thread (detail/parallel_support.hpp: an algorithm's whole run forks on a worker).
  static void keep_on_workers(future<T>& f) noexcept {
    if (f.state_ != nullptr) f.state_->keep_on_workers();
  }
};

// The continuation then(), then_try() or then_error() attaches, and its future.
template <class Src, bool Shared, then_kind Kind, class F>
auto attach(state<Src>& source, pool_ref where, priority p, bool run_inline, F&& f) {
  using G = std::decay_t<F>;
  using call = then_call<Src, G, Shared, Kind>;
  if constexpr (Kind == then_kind::value) {
    static_assert(call::ok,
                  "spool: then(f) needs f callable with the future's value (T, T&& or T&; "
                  "const T& for a shared_future) or with nothing for a void future");
  } else if constexpr (Kind == then_kind::outcome) {
    static_assert(call::ok,
                  "spool: then_try(f) needs f callable with the ready future "
                  "(spool::future<T>, or spool::shared_future<T> for a shared one)");
  } else {
    static_assert(call::ok,
                  "spool: then_error(f) needs f callable with std::exception_ptr, or with one "
                  "exception type (a non-generic f taking const E&)");
    static_assert(call::returns_source_type,
                  "spool: then_error(f) needs f to return the future's value type (or a "
                  "future of it)");
  }
  using U = then_result_t<Src, G, Shared, Kind>;
  check_callable(f);
  auto* t =
      new then_task<Src, G, U, Shared, Kind>(&source, where, p, run_inline, std::forward<F>(f));
  state<U>* out = t;
  source.continue_with(t);  // the continuation holds the source's reference it was given
  return future_access<U>::make(out);
}
}  // namespace detail

template <class T>
template <detail::then_kind Kind, class F>
auto future<T>::chain(detail::pool_ref where, priority p, bool run_inline, F&& f) {
  detail::state<T>& s = checked();
  detail::check_callable(f);
  state_ = nullptr;  // its reference goes to the continuation
  return detail::attach<T, false, Kind>(s, where, p, run_inline, std::forward<F>(f));
}

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
namespace detail {
template <class T, class... A>
future<T> ready_future(pool_ref owner, A&&... args) {
  auto* s = new promise_state<T>(owner);
  s->set_value(std::forward<A>(args)...);
  s->release();  // two references: the promise's (unused here) and the future's
  return future_access<T>::make(s);
}
template <class T>
future<T> exceptional_future(pool_ref owner, std::exception_ptr e) {
  if (!e) throw error(errc::invalid_argument, "spool::make_exceptional_future: null exception");
  auto* s = new promise_state<T>(owner);
  s->set_exception(std::move(e));
  s->release();
  return future_access<T>::make(s);
}
}  // namespace detail

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

namespace detail {

// What a future or shared_future gives: its value type.
template <class F>
struct input_of {};
template <class T>
struct input_of<future<T>> {
  using type = T;
  static constexpr bool shared = false;
};
template <class T>
struct input_of<shared_future<T>> {
  using type = T;
  static constexpr bool shared = true;
};
template <class F>
concept future_like = requires {
  typename input_of<std::remove_cvref_t<F>>::type;
};

// Passes a join's cancellation on to an input: to a future's state (one reference), never to
// a shared_future's (other readers may want it).
template <class F>
void cancel_input(F& in, cancel_walk& up) noexcept {
  if constexpr (!input_of<F>::shared) {
    if (in.valid()) {
      state_base& s = future_access<typename input_of<F>::type>::state_of(in);
      s.add_ref();
      up.add(&s);
    }
  }
}

// The timer behind a when_all_for's or when_any_for's deadline, in the result's pool's timer
// queue. It does not go through the pool's queues: it times the result out on the timer
// thread itself (when due) or on the shutting-down thread (when a shutdown drops it), so a
// deadline passes even while every worker is busy. Timing out a result already settled does
// nothing. Two references: the timer queue's (the flow: heap, then fire() or discard()) and
// the result's (join_deadline), each dropped once; the node holds a reference to the result
// for its whole life.
class deadline_timer : public timer_node {
 public:
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy_node();
  }

 protected:
  deadline_timer() = default;
  ~deadline_timer() = default;
  virtual void destroy_node() noexcept = 0;

 private:
  std::atomic<std::uint32_t> refs_{2};
};

// A join's handle on its deadline timer: dropped, and the timer taken out of its queue, when
// the join settles, so a result settled early costs the timer thread no wake-up and holds no
// memory until the deadline.
class join_deadline {
 public:
  join_deadline() = default;
  join_deadline(const join_deadline&) = delete;
  join_deadline& operator=(const join_deadline&) = delete;
  ~join_deadline() {
    if (deadline_timer* t = timer_.load(std::memory_order_relaxed)) t->release();
  }
  void set(deadline_timer* t) noexcept { timer_.store(t, std::memory_order_release); }
  deadline_timer* take() noexcept { return timer_.exchange(nullptr, std::memory_order_acq_rel); }
  // The result is settled: the deadline is no longer wanted.
  void settle(pool_ref owner) noexcept {
    if (deadline_timer* t = take()) {
      if (timer_remove(owner, *t)) t->release();  // out of the heap: the flow's is ours
      t->release();
    }
  }

 private:
  std::atomic<deadline_timer*> timer_{nullptr};
};

// The inputs of a join, whether a tuple or a vector, one at a time.
template <class Inputs, class G>
void for_each_input(Inputs& in, G g) noexcept {
  if constexpr (requires { std::tuple_size<Inputs>::value; }) {
    std::apply([&g](auto&... each) { (g(each), ...); }, in);
  } else {
    for (auto& each : in) g(each);
  }
}

// What a join's result holds besides the count: its inputs and its deadline, and the two ways
// it fails before it is built (the deadline, a cancellation), both of which cancel the inputs.
template <class Result, class Inputs>
class inputs_state : public unqueued_state<Result> {
 public:
  inputs_state(pool_ref owner, Inputs in) : unqueued_state<Result>(owner), inputs_(std::move(in)) {}

  // The deadline passed (or could not be kept: why): fails the result, cancels the inputs.
  void time_out(std::error_code why) noexcept {
    if (!this->try_claim()) return;
    // The inputs first: whoever sees the result timed out sees them cancelled.
    cancel_walk up;
    for_each_input(inputs_, [&up](auto& in) { cancel_input(in, up); });
    state_base::cancel_all(up);
    this->complete_failure(std::make_exception_ptr(error(static_cast<errc>(why.value()))));
    deadline_.settle(this->owner());
  }
  Inputs& inputs() noexcept { return inputs_; }
  join_deadline& deadline() noexcept { return deadline_; }

 protected:
  bool cancel_here(cancel_walk& up) noexcept override {
    if (!this->try_claim()) return false;
    this->complete_failure(std::make_exception_ptr(task_cancelled()));
    for_each_input(inputs_, [&up](auto& in) { cancel_input(in, up); });
    deadline_.settle(this->owner());
    return true;
  }

 private:
  Inputs inputs_;
  join_deadline deadline_;
};

// Counts inputs down to zero; the last arrival builds the result (every input is ready then),
// unless a cancellation or the deadline claimed the state first.
template <class Out, class Inputs, class Build>
class join_state final : public inputs_state<Out, Inputs> {
 public:
  join_state(pool_ref owner, Inputs in, std::size_t n, Build build)
      : inputs_state<Out, Inputs>(owner, std::move(in)), left_(n), build_(std::move(build)) {}

  void arrive(std::size_t) noexcept {
    if (left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (this->try_claim()) {
      this->complete_from([this] {
        auto call = [this]() -> Out { return build_(this->inputs()); };
        this->produce(call);
      });
      this->deadline().settle(this->owner());
    }
    this->release();  // the arrivals' reference
  }

 private:
  std::atomic<std::size_t> left_;
  Build build_;
};

// The first arrival to claim the state wins: it hands the inputs back with its index. The
// arrivals together hold one reference, dropped by the last of them.
template <class Result, class Inputs>
class any_state final : public inputs_state<Result, Inputs> {
 public:
  any_state(pool_ref owner, Inputs in, std::size_t n)
      : inputs_state<Result, Inputs>(owner, std::move(in)), left_(n) {}

  void arrive(std::size_t index) noexcept {
    if (this->try_claim()) {
      // Moving a vector or a tuple of futures and writing a size_t cannot throw.
      this->produce_value(Result{index, std::move(this->inputs())});
      this->complete(state_base::held::value);
      this->deadline().settle(this->owner());
    }
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) this->release();
  }

 private:
  std::atomic<std::size_t> left_;
};

// The deadline timer of one join (see deadline_timer).
template <class Join>
class join_timer final : public deadline_timer {
 public:
  explicit join_timer(Join* j) noexcept : join_(j) { join_->add_ref(); }
  void fire(core&) noexcept override { end(); }
  void discard() noexcept override { end(); }

 private:
  void end() noexcept {
    join_->time_out(errc::timed_out);
    release();
  }
  void destroy_node() noexcept override {
    join_->release();
    delete this;
  }
  Join* join_;
};

// Gives j a deadline on its pool's timer queue. A join whose pool cannot keep it (shut down or
// gone) fails at once with that error. Throws (j untouched) if there is no memory or no pool.
template <class Join>
void arm_deadline(Join* j, std::chrono::steady_clock::time_point deadline) {
  const pool_ref owner = j->owner();
  if (owner.owner == nullptr) {
    throw error(errc::invalid_argument,
                "spool: when_all_for/when_any_for needs a first input that belongs to a pool");
  }
  auto* t = new join_timer<Join>(j);
  t->deadline = deadline;
  j->deadline().set(t);
  if (std::error_code ec = timer_schedule(owner, *t)) {
    j->deadline().take();
    j->time_out(ec);
    t->release();
    t->release();
  }
}

// The continuation registered on input `index` of a join_state or any_state. It runs on the
// thread that completes the input, in constant stack (run_here), and never enters a pool:
// arriving is a count and, for the last arrival, building the result.
template <class Join>
class arrival final : public continuation {
 public:
  arrival(Join* j, std::size_t index) noexcept : join_(j), index_(index) {}
  void on_ready() noexcept override { run_here(this); }
  void run_inline() noexcept override {
    Join* j = join_;
    const std::size_t i = index_;
    delete this;
    j->arrive(i);
  }
  outcome run(core&) noexcept override { std::terminate(); }
  void cancel() noexcept override { std::terminate(); }
  void destroy() noexcept override { std::terminate(); }

 private:
  Join* join_;
  std::size_t index_;
};

template <class F>
state<typename input_of<F>::type>& checked_state(F& f) {
  if (!f.valid()) throw error(errc::invalid_argument, "spool: when_all/when_any of no future");
  return future_access<typename input_of<F>::type>::state_of(f);
}

// Registers an arrival for every input of j, in order, through the states (the first
// arrival may move the inputs). Everything that can throw comes first; on a throw, the
// arrivals' reference to j is dropped (none will arrive) and the exception goes on.
template <class Join, class Inputs>
void arrive_on(Join* j, Inputs& in) {
  std::vector<state_base*> states;
  std::vector<arrival<Join>*> arrivals;
  try {
    if constexpr (requires { std::tuple_size<Inputs>::value; }) {
      states.reserve(std::tuple_size_v<Inputs>);
      std::apply([&states](auto&... each) { (states.push_back(&checked_state(each)), ...); }, in);
    } else {
      states.reserve(in.size());
      for (auto& each : in) states.push_back(&checked_state(each));
    }
    arrivals.reserve(states.size());
    for (std::size_t i = 0; i < states.size(); ++i) arrivals.push_back(new arrival<Join>(j, i));
  } catch (...) {
    for (auto* a : arrivals) delete a;
    j->release();
    throw;
  }
  for (std::size_t i = 0; i < states.size(); ++i) states[i]->continue_with(arrivals[i]);
}

// A variadic when_all's tuple element for an input of type T: T itself, or std::monostate
// for void, which has no value to hold.
template <class T>
using slot_of = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class F>
slot_of<typename input_of<F>::type> take_slot(F& f) {
  using T = typename input_of<F>::type;
  if constexpr (std::is_void_v<T>) {
    f.get();
    return std::monostate{};
  } else {
    return f.get();  // a shared_future's value is copied
  }
}

// Checks every input before any is moved in.
template <class... F>
void check_inputs(F&... in) {
  (checked_state(in), ...);
}

}  // namespace detail

namespace detail {
using steady_deadline = std::chrono::steady_clock::time_point;

// Builds the join, registers its arrivals and, given one, arms its deadline. The result's
// future holds one reference and the arrivals one; on a throw both are given back.
template <class Join, class Out, class Inputs, class... A>
future<Out> start_join(const steady_deadline* deadline, pool_ref owner, Inputs in, A&&... args) {
  auto* j = new Join(owner, std::move(in), std::forward<A>(args)...);
  future<Out> result = future_access<Out>::make(j);
  if (deadline != nullptr) {
    try {
      arm_deadline(j, *deadline);
    } catch (...) {
      j->release();  // the arrivals': none will come
      throw;
    }
  }
  arrive_on(j, j->inputs());
  return result;
}

template <future_like F0, future_like... F>
auto when_all_of(const steady_deadline* deadline, F0 first, F... rest) {
  check_inputs(first, rest...);
  using Out =
      std::tuple<slot_of<typename input_of<F0>::type>, slot_of<typename input_of<F>::type>...>;
  using Inputs = std::tuple<F0, F...>;
  auto build = [](Inputs& f) {
    // Braces: the inputs are read (and the first failure rethrown) in argument order.
    return std::apply([](auto&... each) { return Out{take_slot(each)...}; }, f);
  };
  using Join = join_state<Out, Inputs, decltype(build)>;
  const pool_ref owner = checked_state(first).owner();
  return start_join<Join, Out>(deadline, owner, Inputs(std::move(first), std::move(rest)...),
                               1 + sizeof...(F), build);
}

template <class F>
auto when_all_of(const steady_deadline* deadline, std::vector<F> in) {
  using T = typename input_of<F>::type;
  if (in.empty()) throw error(errc::invalid_argument, "spool::when_all of no futures");
  for (auto& f : in) checked_state(f);
  using Out = std::conditional_t<std::is_void_v<T>, void, std::vector<T>>;
  using Inputs = std::vector<F>;
  auto build = [](Inputs& fs) -> Out {
    if constexpr (std::is_void_v<T>) {
      for (auto& f : fs) f.get();
    } else {
      Out values;
      values.reserve(fs.size());
      for (auto& f : fs) values.push_back(f.get());
      return values;
    }
  };
  using Join = join_state<Out, Inputs, decltype(build)>;
  const pool_ref owner = checked_state(in.front()).owner();
  const std::size_t n = in.size();
  return start_join<Join, Out>(deadline, owner, std::move(in), n, build);
}

template <class T>
future<when_any_result<T>> when_any_of(const steady_deadline* deadline, std::vector<future<T>> in) {
  if (in.empty()) throw error(errc::invalid_argument, "spool::when_any of no futures");
  for (auto& f : in) checked_state(f);
  using Result = when_any_result<T>;
  using Any = any_state<Result, std::vector<future<T>>>;
  const pool_ref owner = checked_state(in.front()).owner();
  const std::size_t n = in.size();
  return start_join<Any, Result>(deadline, owner, std::move(in), n);
}

template <class T0, class... T>
future<when_any_tuple_result<T0, T...>> when_any_of(const steady_deadline* deadline,
                                                    future<T0> first, future<T>... rest) {
  check_inputs(first, rest...);
  using Result = when_any_tuple_result<T0, T...>;
  using Inputs = std::tuple<future<T0>, future<T>...>;
  using Any = any_state<Result, Inputs>;
  const pool_ref owner = checked_state(first).owner();
  return start_join<Any, Result>(deadline, owner, Inputs(std::move(first), std::move(rest)...),
                                 1 + sizeof...(T));
}

template <class Clock, class Duration>
steady_deadline to_steady(const std::chrono::time_point<Clock, Duration>& deadline) {
  if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
    return std::chrono::time_point_cast<std::chrono::steady_clock::duration>(deadline);
  } else {
    return deadline_after(
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()));
  }
}
}  // namespace detail

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
