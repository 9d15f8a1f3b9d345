// peer.hpp: the shape every peer adapter has, so that an experiment is written once.
//
// An adapter wraps one pool of exactly N threads that run tasks (its constructor takes N) and
// offers:
//   static constexpr std::string_view name;
//   void post(F)           fire and forget; from the calling thread inside run_and_wait(), or
//                          from a running task
//   void run_and_wait(F)   runs F (which posts), returns when every task posted meanwhile, and
//                          every task those posted, has finished. OpenMP and task_group need
//                          this frame: their tasks exist only inside a parallel region / arena.
// and, where the pool supports it (otherwise the matching reason below is non-empty, the member
// is absent, and the experiment shows "n/a" with that reason):
//   submit(F) -> future    with get(); from outside the pool          (no_future)
//   fork_join(child, here) runs child as a task and here() inline, then waits for the child,
//                          from inside a task                          (no_fork_join)
//   round_trip(F)          hands F to a pool thread and waits for it, the way a user of that
//                          pool would                                  (no_round_trip)
//   and a producer outside the pool posting while N threads consume   (no_outside_producer)
// An adapter derives from peer_base<itself>, which gives every reason empty (the pool runs
// everything) and round_trip() as submit(f).get(); the adapter declares what differs.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <string_view>
#include <type_traits>
#include <utility>

#include "measure_point.hpp"

namespace bench {

// Why a pool without help-while-wait cannot run fork/join: the n/a reason its adapter gives.
inline constexpr std::string_view blocking_wait_deadlocks =
    "a task that waits for its child blocks its thread (no help-while-wait): deadlocks once "
    "every thread waits";

template <class P>
concept peer_adapter = requires(P p) {
  { P::name } -> std::convertible_to<std::string_view>;
  { P::no_future } -> std::convertible_to<std::string_view>;
  { P::no_fork_join } -> std::convertible_to<std::string_view>;
  { P::no_round_trip } -> std::convertible_to<std::string_view>;
  { P::no_outside_producer } -> std::convertible_to<std::string_view>;
  p.post([] {});
  p.run_and_wait([] {});
  // Not std::constructible_from: tbb::task_group's destructor may throw.
  requires std::is_constructible_v<P, unsigned>;
};

// What an adapter has unless it says otherwise: no reason not to run a workload, and a round
// trip through a future.
template <class Derived>
class peer_base {
 public:
  static constexpr std::string_view no_future{}, no_fork_join{}, no_round_trip{},
      no_outside_producer{};

  template <class F>
  void round_trip(F&& f) {
    static_cast<Derived&>(*this).submit(std::forward<F>(f)).get();
  }
};

// How the pools without a wait of their own (asio, tbb_arena) learn that everything posted has
// run: a pending count that each task decrements, and the waiter sleeps on (C++20 atomic wait,
// a futex on its address). A task pays one atomic operation; only the decrement to zero wakes.
// The waiter may destroy the counter as soon as it reads zero, so the last task must not touch
// it afterwards: notify_all() uses only the address (a futex wake), never the object's memory,
// which a mutex and condition variable here could not promise.
class completion_counter {
 public:
  void add() noexcept { pending_.fetch_add(1, std::memory_order_relaxed); }
  void done() noexcept {
    // acq_rel: every task's effects (the decrements form one release sequence) happen before
    // the waiter's return.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_all();
  }
  void wait() const noexcept {
    // Only the decrement to zero notifies; a wait(v) that races with it returns because the
    // value is no longer v (the futex compares atomically), so no wake-up is lost.
    for (int v = pending_.load(std::memory_order_acquire); v != 0;
         v = pending_.load(std::memory_order_acquire))
      pending_.wait(v, std::memory_order_acquire);
  }

 private:
  std::atomic<int> pending_{0};  // int: the type libstdc++ waits on with a futex directly
};

// The base of an adapter over a pool with a wait of its own for everything posted
// (wait_idle(): spool, mutex_pool): it holds the pool, made from the constructor's arguments.
template <class Derived, class Pool>
class waits_idle : public peer_base<Derived> {
 public:
  template <class F>
  void post(F&& f) {
    pool_.post(std::forward<F>(f));
  }
  template <class F>
  void run_and_wait(F&& f) {
    f();
    pool_.wait_idle();
  }

 protected:
  template <class... Args>
  explicit waits_idle(Args&&... args) : pool_(std::forward<Args>(args)...) {}
  Pool pool_;
};

// The base of an adapter over a pool with no wait of its own for posted work (asio,
// tbb_arena): the adapter posts counted(f) instead of f, and run_and_wait() returns when every
// task so posted has run. The counted task calls f as const (TBB calls its functors so).
template <class Derived>
class counted_posts : public peer_base<Derived> {
 public:
  template <class F>
  void run_and_wait(F&& f) {
    f();
    pending_.wait();
  }

 protected:
  template <class F>
  auto counted(F&& f) {
    pending_.add();
    return [this, fn = std::decay_t<F>(std::forward<F>(f))] {
      fn();
      pending_.done();
    };
  }

 private:
  // A base: destroyed after the adapter's pool, whose threads run the counted tasks.
  completion_counter pending_;
};

// Makes the pool start its threads (TBB and OpenMP create them on first use) so that no
// measurement pays for thread creation.
template <class P>
void warm_up(P& peer, unsigned threads) {
  peer.run_and_wait([&] {
    for (unsigned i = 0; i < 4 * threads; ++i) peer.post([] {});
  });
}

// One measurement on a fresh pool: settle, construct, warm up, measure, destroy. Every repeat
// of every point gets its own pool, and only one pool exists at a time, so no idle pool of one
// peer competes for the 2 cores while another is measured.
template <class P, class Body>
auto fresh_run(unsigned threads, Body body,
               std::chrono::milliseconds quiet = std::chrono::milliseconds(10)) {
  return [=] {
    settle(quiet);
    P peer(threads);
    warm_up(peer, threads);
    return body(peer);
  };
}

// fresh_run after an untimed rehearsal: the same body once on a fresh pool of its own, its
// sample dropped (its checks still apply). The first batch of a million tasks in a process
// pays one-time costs: the heap grows page by page and the allocators' free lists fill
// (oneTBB's task_group ran it at about 3 M tasks/s, the next at 11-15 M/s, 16 threads on 2
// cores).
// In one process only each peer's first repeat paid them; with a process per measurement
// (child_measurement.hpp) every measurement would. After a rehearsal none does, in either mode.
template <class P, class Body>
auto rehearsed_run(unsigned threads, Body body) {
  return [=] {
    fresh_run<P>(threads, body)();
    return fresh_run<P>(threads, body)();
  };
}

}  // namespace bench
