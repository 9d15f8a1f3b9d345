// spool/future.hpp: the result of pool::submit(), and what composes results without blocking:
// future::then, shared_future, promise, when_all, when_any. Coroutines are in spool/coro.hpp.
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

#include "spool/detail/future_state.hpp"
#include "spool/error.hpp"

namespace spool {

class pool;
template <class T>
class shared_future;
template <class T>
class promise;
template <class T>
struct when_any_result;

namespace detail {
// The pool's core, for the continuations' states (src/api/pool.cpp).
core* core_of(pool& p) noexcept;
// Library-internal access to a future's state.
template <class T>
struct future_access;
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

  // ---- Continuations (spool/coro.hpp adds co_await) ----
  // Returns the future of f(value), where f runs as a task on this future's pool once this
  // future is ready; no thread blocks in between. f takes the value (T, T& or nothing for
  // void). If this future failed or was cancelled, f is not called and the returned future
  // rethrows the same exception. Leaves this future empty. If the pool refuses the
  // continuation (shut down), it runs on the thread that completed this future.
  // Empty future: spool::error(errc::invalid_argument).
  template <class F>
  auto then(F&& f) {
    using G = std::decay_t<F>;
    using U = typename detail::then_result<T, G>::type;
    checked();
    detail::state<T>* s = std::exchange(state_, nullptr);
    auto* t = new detail::then_task<T, G, U, false>(s, std::forward<F>(f));
    detail::state<U>* out = t;
    s->continue_with(t);  // takes over this future's reference to s
    return future<U>(out);
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
  void reset() noexcept {
    if (state_ != nullptr) std::exchange(state_, nullptr)->release();
  }

  detail::state<T>* state_ = nullptr;
};

// ---- Continuations: shared_future, promise, when_all, when_any ----

namespace detail {
template <class T>
struct future_access {
  static state<T>& state_of(future<T>& f) noexcept { return *f.state_; }
  static state<T>& state_of(shared_future<T>& f) noexcept { return *f.state_; }
  static future<T> make(state<T>* s) noexcept { return future<T>(s); }
  // A future whose get() must leave its task to the workers, never run it on the waiting
  // thread (detail/parallel_support.hpp: an algorithm's whole run forks on a worker).
  static void keep_on_workers(future<T>& f) noexcept {
    if (f.state_ != nullptr) f.state_->keep_on_workers();
  }
};
}  // namespace detail

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

  // Waits, then returns the value or rethrows the failure. The future stays valid.
  decltype(auto) get() const {
    wait();
    return state_->peek();
  }

  // As future::then, but f receives the value as get() returns it, and this future stays
  // valid: any number of continuations may be attached.
  template <class F>
  auto then(F&& f) const {
    using G = std::decay_t<F>;
    using Arg = decltype(std::declval<detail::state<T>&>().peek());
    using U = typename detail::then_result<Arg, G>::type;
    detail::state<T>& s = checked();
    s.add_ref();  // the continuation's own reference
    auto* t = new detail::then_task<T, G, U, true>(&s, std::forward<F>(f));
    detail::state<U>* out = t;
    s.continue_with(t);
    return future<U>(out);
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
  detail::state<T>* state_ = nullptr;
};

// The writing end of a future that no task computes: completed from any thread by
// set_value() or set_exception(). Continuations attached to its future run on `p`, which
// must outlive the promise's completion. A promise destroyed without a result completes its
// future with spool::task_cancelled (as a dropped task does). get_future() may be called
// once (again: errc::invalid_argument); setting twice, or after a move: invalid_argument.
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
  template <class... A>
  void set_value(A&&... args) {
    detail::promise_state<T>* s = take_state();
    struct releaser {
      detail::promise_state<T>* s;
      ~releaser() { s->release(); }
    } guard{s};
    std::exception_ptr failure;
    try {
      s->set_value(std::forward<A>(args)...);
    } catch (...) {  // the value's constructor threw: that is the result
      failure = std::current_exception();
    }
    if (failure) s->set_exception(std::move(failure));  // after the handler (see run_root)
  }
  void set_exception(std::exception_ptr e) {
    if (!e) throw error(errc::invalid_argument, "spool::promise: null exception");
    detail::promise_state<T>* s = take_state();
    s->set_exception(std::move(e));
    s->release();
  }

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

// What when_any's future holds: the index of an input that was ready first, and all the
// inputs, in their order, handed back (inputs[index] is ready; get() it for its value).
template <class T>
struct when_any_result {
  std::size_t index = 0;
  std::vector<future<T>> futures;
};

namespace detail {

// Counts inputs down to zero; the last arrival builds the result (every input is ready then).
template <class Out, class Inputs, class Build>
class join_state final : public unqueued_state<Out> {
 public:
  join_state(core* owner, Inputs in, std::size_t n, Build build)
      : unqueued_state<Out>(owner), inputs_(std::move(in)), left_(n), build_(std::move(build)) {}

  void arrive(std::size_t) noexcept {
    if (left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    try {
      auto call = [this]() -> Out { return build_(inputs_); };
      this->produce(call);
    } catch (...) {
      this->fail(std::current_exception());
    }
    this->complete();
    this->release();  // the arrivals' reference
  }
  Inputs& inputs() noexcept { return inputs_; }

 private:
  Inputs inputs_;
  std::atomic<std::size_t> left_;
  Build build_;
};

// The first arrival wins: it hands the inputs back with its index. The arrivals together
// hold one reference, dropped by the last of them.
template <class T>
class any_state final : public unqueued_state<when_any_result<T>> {
 public:
  any_state(core* owner, std::vector<future<T>> in)
      : unqueued_state<when_any_result<T>>(owner), inputs_(std::move(in)), left_(inputs_.size()) {}

  void arrive(std::size_t index) noexcept {
    if (!won_.exchange(true, std::memory_order_acq_rel)) {
      // Moving a vector and writing a size_t cannot throw.
      when_any_result<T> r{index, std::move(inputs_)};
      this->produce_value(std::move(r));
      this->complete();
    }
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) this->release();
  }
  std::vector<future<T>>& inputs() noexcept { return inputs_; }

 private:
  std::vector<future<T>> inputs_;
  std::atomic<bool> won_{false};
  std::atomic<std::size_t> left_;
};

// The continuation registered on input `index` of a join_state or any_state. Dropped unrun
// (a discarding shutdown), it arrives all the same: its input is ready either way.
template <class Join>
class arrival final : public continuation_task {
 public:
  arrival(Join* j, std::size_t index) noexcept : join_(j), index_(index) {}
  outcome run(core&) noexcept override {
    arrive();
    return outcome::completed;
  }
  void cancel() noexcept override { arrive(); }

 private:
  void arrive() noexcept {
    Join* j = join_;
    const std::size_t i = index_;
    delete this;
    j->arrive(i);
  }
  Join* join_;
  std::size_t index_;
};

template <class T>
state<T>& checked_state(future<T>& f) {
  if (!f.valid()) throw error(errc::invalid_argument, "spool: when_all/when_any of no future");
  return future_access<T>::state_of(f);
}

// Registers an arrival for every input of j, in order.
template <class Join, class... T>
void arrive_on(Join* j, future<T>&... in) {
  std::size_t i = 0;
  (future_access<T>::state_of(in).continue_with(new arrival<Join>(j, i++)), ...);
}

// A variadic when_all's tuple element for an input of type T: T itself, or std::monostate
// for void, which has no value to hold.
template <class T>
using slot_of = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class T>
slot_of<T> take_slot(future<T>& f) {
  if constexpr (std::is_void_v<T>) {
    f.get();
    return std::monostate{};
  } else {
    return f.get();
  }
}

}  // namespace detail

// A future of the values of every input, ready once all of them are; if any input failed,
// it rethrows the exception of the first failed input in argument order. The inputs are
// moved in. The result belongs to the first input's pool. A future<void> input gives a
// std::monostate in its place, so positions in the tuple match positions in the call. An
// empty input future: spool::error(errc::invalid_argument).
template <class T0, class... T>
future<std::tuple<detail::slot_of<T0>, detail::slot_of<T>...>> when_all(future<T0> first,
                                                                        future<T>... rest) {
  detail::checked_state(first);
  (detail::checked_state(rest), ...);
  using Out = std::tuple<detail::slot_of<T0>, detail::slot_of<T>...>;
  using Inputs = std::tuple<future<T0>, future<T>...>;
  auto build = [](Inputs& f) {
    // Braces: the inputs are read (and the first failure rethrown) in argument order.
    return std::apply([](auto&... each) { return Out{detail::take_slot(each)...}; }, f);
  };
  using Join = detail::join_state<Out, Inputs, decltype(build)>;
  detail::core* owner = detail::future_access<T0>::state_of(first).owner();
  auto* j = new Join(owner, Inputs(std::move(first), std::move(rest)...), 1 + sizeof...(T), build);
  future<Out> result = detail::future_access<Out>::make(j);
  std::apply([j](auto&... each) { detail::arrive_on(j, each...); }, j->inputs());
  return result;
}

// The vector form: a future of every value in input order (future<void> for void inputs),
// with the same failure rule. An empty vector or an empty future in it:
// spool::error(errc::invalid_argument).
template <class T>
auto when_all(std::vector<future<T>> in) {
  if (in.empty()) throw error(errc::invalid_argument, "spool::when_all of no futures");
  for (auto& f : in) detail::checked_state(f);
  using Out = std::conditional_t<std::is_void_v<T>, void, std::vector<T>>;
  using Inputs = std::vector<future<T>>;
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
  using Join = detail::join_state<Out, Inputs, decltype(build)>;
  detail::core* owner = detail::future_access<T>::state_of(in.front()).owner();
  const std::size_t n = in.size();
  auto* j = new Join(owner, std::move(in), n, build);
  future<Out> result = detail::future_access<Out>::make(j);
  for (std::size_t i = 0; i < n; ++i) {
    detail::future_access<T>::state_of(j->inputs()[i]).continue_with(
        new detail::arrival<Join>(j, i));
  }
  return result;
}

// A future that is ready once any input is: it holds the index of the input whose
// completion was seen first and every input handed back (see when_any_result). It never
// fails itself: a failed input counts as ready, and its get() rethrows. Inputs completing
// later are left in the returned futures. An empty vector or an empty future in it:
// spool::error(errc::invalid_argument).
template <class T>
future<when_any_result<T>> when_any(std::vector<future<T>> in) {
  if (in.empty()) throw error(errc::invalid_argument, "spool::when_any of no futures");
  for (auto& f : in) detail::checked_state(f);
  using Any = detail::any_state<T>;
  detail::core* owner = detail::future_access<T>::state_of(in.front()).owner();
  const std::size_t n = in.size();
  auto* a = new Any(owner, std::move(in));
  future<when_any_result<T>> result = detail::future_access<when_any_result<T>>::make(a);
  // Register through the states, not the vector: the first arrival may move the vector.
  std::vector<detail::state<T>*> states;
  states.reserve(n);
  for (auto& f : a->inputs()) states.push_back(&detail::future_access<T>::state_of(f));
  for (std::size_t i = 0; i < n; ++i) states[i]->continue_with(new detail::arrival<Any>(a, i));
  return result;
}

template <class T>
promise<T>::promise(pool& p) : state_(new detail::promise_state<T>(detail::core_of(p))) {
  state_->release();  // see state_: the future's reference is added by get_future()
}

}  // namespace spool
