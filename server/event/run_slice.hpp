// event/run_slice.hpp: how long an event loop keeps its core before it offers it to others.
//
// A loop under steady load finds events at every epoll_wait and never blocks: a client that
// sends the next request while the loop answers the last one keeps it running. The kernel then
// takes the core from it only when its time slice is used up, which the scheduler checks at a
// tick (every 4 ms at HZ=250), and a thread that waits for that core meanwhile waits that long:
// a client on the same host with responses to read, a pool worker with a store's answer,
// another loop. Those waits are what a keep-alive load's p99 measures (bench/load/BENCHMARKS.md,
// "A loop that yields its core").
//
// So a loop yields (sched_yield) once it has run for a slice since it last gave its core up.
// It gave it up when it yielded, or when its wait for events lasted a whole slice: either the
// loop slept that long or it was preempted meanwhile, and others ran. A yield with no other
// thread runnable on the core returns at once; with one, that thread runs first.
//
// Invariant: due() answers true only when a whole slice has passed since the loop last yielded
// (counted from the yield's return) or last waited a slice (counted from the wait's end); so a
// loop's yields are at least a slice apart, and a loop that waits a slice between its turns
// never yields. A slice of zero turns yielding off.
#pragma once

#include <chrono>

namespace spoold {

class run_slice {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  run_slice(std::chrono::microseconds slice, time_point now) noexcept
      : slice_(slice), since_(now) {}

  // A wait for events began at `before` and ended at `after`.
  void waited(time_point before, time_point after) noexcept {
    if (after - before >= slice_) since_ = after;
  }

  // Whether the loop, at `now`, should yield its core.
  [[nodiscard]] bool due(time_point now) const noexcept {
    return slice_.count() != 0 && now - since_ >= slice_;
  }

  // The loop's yield returned at `after`: its next slice starts there, however long others ran.
  void yielded(time_point after) noexcept { since_ = after; }

 private:
  std::chrono::microseconds slice_;
  time_point since_;  // when the loop last gave its core up
};

}  // namespace spoold
