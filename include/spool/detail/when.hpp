// spool/detail/when.hpp: the machinery of when_all and when_any (spool/future.hpp): a join's
// state, the arrivals that count its inputs down, its deadline timer. Internal: users never
// name these.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "spool/detail/future_access.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/detail/timer.hpp"
#include "spool/error.hpp"

namespace spool {

template <class T>
struct when_any_result;
template <class... T>
struct when_any_tuple_result;

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
}  // namespace spool
