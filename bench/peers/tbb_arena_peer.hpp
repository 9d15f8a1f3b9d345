// tbb_arena_peer.hpp: oneTBB's task_arena::enqueue, its fire-and-forget submission.
#pragma once

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <string_view>
#include <type_traits>
#include <utility>

#include "peers/peer.hpp"

namespace bench {

// task_arena(N, 0): N slots, none reserved for an outside thread, so N TBB workers run the
// tasks while the caller only enqueues and waits, as with spool. TBB offers no wait for
// enqueued tasks, so completion is tracked with a completion_counter.
class tbb_arena_peer {
 public:
  static constexpr std::string_view name = "tbb_arena";
  static constexpr std::string_view no_future = "task_arena::enqueue returns nothing to wait on";
  static constexpr std::string_view no_fork_join =
      "task_arena::enqueue has no join (TBB's fork/join is the tbb_task_group row)";
  static constexpr std::string_view no_round_trip{};
  static constexpr std::string_view no_outside_producer{};

  explicit tbb_arena_peer(unsigned threads)
      : limit_(tbb::global_control::max_allowed_parallelism, threads + 1),
        arena_(static_cast<int>(threads), 0) {
    arena_.initialize();
  }

  template <class F>
  void post(F&& f) {
    pending_.add();
    // TBB calls the functor as const, so F's call operator must be const (lambdas' are).
    arena_.enqueue([this, fn = std::decay_t<F>(std::forward<F>(f))] {
      fn();
      pending_.done();
    });
  }
  template <class F>
  void run_and_wait(F&& f) {
    f();
    pending_.wait();
  }
  template <class F>
  void round_trip(F&& f) {
    post(std::forward<F>(f));
    pending_.wait();
  }

 private:
  completion_counter pending_;
  tbb::global_control limit_;  // see tbb_task_group_peer
  tbb::task_arena arena_;
};

}  // namespace bench
