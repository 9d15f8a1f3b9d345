// tbb_task_group_peer.hpp: oneTBB's task_group run inside a task_arena of N threads.
#pragma once

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <cstddef>
#include <string_view>
#include <utility>

#include "peers/peer.hpp"

namespace bench {

// task_arena(N, 1): N slots, one of them reserved for the thread that enters the arena. That
// thread (the caller of run_and_wait) posts and then works inside task_group::wait() as one of
// the N, beside N-1 TBB workers; this is how TBB is meant to be driven from outside.
class tbb_task_group_peer : public peer_base<tbb_task_group_peer> {
 public:
  static constexpr std::string_view name = "tbb_task_group";
  static constexpr std::string_view no_future =
      "tbb::task_group has no per-task future (a task reports through captured state)";
  static constexpr std::string_view no_outside_producer =
      "task_group::run must be called inside the arena, so the producer would take one of the N "
      "consumer slots (see tbb_arena)";

  explicit tbb_task_group_peer(unsigned threads)
      : limit_(tbb::global_control::max_allowed_parallelism, threads + 1),
        arena_(static_cast<int>(threads), 1) {
    arena_.initialize();
  }

  template <class F>
  void post(F&& f) {
    group_.run(std::forward<F>(f));
  }
  // oneTBB's bulk form: parallel_for over [0, n) calling f(i) (auto_partitioner: the range
  // is split among the arena's threads as they steal), inside run_and_wait().
  template <class F>
  void bulk(std::size_t n, const F& f) {
    tbb::parallel_for(std::size_t{0}, n, [&f](std::size_t i) { f(i); });
  }
  template <class F>
  void run_and_wait(F&& f) {
    arena_.execute([&] {
      f();
      group_.wait();
    });
  }
  // run + wait from the thread inside the arena: wait() runs the task itself when no worker
  // has taken it yet (spool's outside waiter does the same with its own task).
  template <class F>
  void round_trip(F&& f) {
    run_and_wait([&] { post(std::forward<F>(f)); });
  }
  template <class Child, class Here>
  void fork_join(Child&& child, Here&& here) {
    tbb::task_group joined;
    joined.run([&child] { child(); });
    here();
    joined.wait();
  }

 private:
  // TBB's default limit is one thread per core; more threads than cores (16 on 2 cores) need
  // this raised, or the arena would silently run with fewer workers than asked.
  tbb::global_control limit_;
  tbb::task_arena arena_;
  tbb::task_group group_;
};

}  // namespace bench
