// tbb_arena_peer.hpp: oneTBB's task_arena::enqueue, its fire-and-forget submission.
#pragma once

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <string_view>
#include <utility>

#include "peers/peer.hpp"

namespace bench {

// task_arena(N, 0): N slots, none reserved for an outside thread, so N TBB workers run the
// tasks while the caller only enqueues and waits, as with spool. TBB offers no wait for
// enqueued tasks, so completion is tracked by counting them (counted_posts).
class tbb_arena_peer : public counted_posts<tbb_arena_peer> {
 public:
  static constexpr std::string_view name = "tbb_arena";
  static constexpr std::string_view no_future = "task_arena::enqueue returns nothing to wait on";
  static constexpr std::string_view no_fork_join =
      "task_arena::enqueue has no join (TBB's fork/join is the tbb_task_group row)";

  explicit tbb_arena_peer(unsigned threads)
      : limit_(tbb::global_control::max_allowed_parallelism, threads + 1),
        arena_(static_cast<int>(threads), 0) {
    arena_.initialize();
  }

  template <class F>
  void post(F&& f) {
    arena_.enqueue(counted(std::forward<F>(f)));
  }
  // The task handed over, and the wait for it.
  template <class F>
  void round_trip(F&& f) {
    run_and_wait([&] { post(std::forward<F>(f)); });
  }

 private:
  tbb::global_control limit_;  // see tbb_task_group_peer
  tbb::task_arena arena_;
};

}  // namespace bench
