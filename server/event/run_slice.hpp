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
// So a loop yields (sched_yield) once it has held its core for a whole slice. Whether it did is
// told by its context switches (getrusage(RUSAGE_THREAD): the voluntary ones, when it slept,
// and the involuntary ones, when it was preempted): a loop whose count moved within the slice
// gave its core up meanwhile, and others ran. Reading the count is a system call, so the loop
// reads it only once a slice has passed on the clock since it last did: a loop that sleeps
// between short turns (a light load, or one whose work waits on the pool) reads it once a
// slice, finds it moved, and never yields. A yield with no other thread runnable on the core
// returns at once; with one, that thread runs first.
//
// Invariant: held_core() answers true only for a slice through which the loop's context-switch
// count stayed as it was at the slice's start (the last yield's return, or the last reading that
// found the count moved); so a loop's yields are at least a slice apart, and a loop that sleeps
// at least once a slice never yields. A slice of zero turns yielding off.
#pragma once

#include <chrono>
#include <cstdint>

namespace spoold {

class run_slice {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // `switches`: the loop's context switches so far.
  run_slice(std::chrono::microseconds slice, time_point now, std::uint64_t switches) noexcept
      : slice_(slice), since_(now), switches_(switches) {}

  // Whether a slice has passed since the current one began: time to read the switch count.
  [[nodiscard]] bool due(time_point now) const noexcept {
    return slice_.count() != 0 && now - since_ >= slice_;
  }

  // At a due time, with the loop's context switches so far: true when none happened since the
  // slice began (the loop should yield); otherwise a new slice begins at `now`.
  [[nodiscard]] bool held_core(time_point now, std::uint64_t switches) noexcept {
    if (switches == switches_) return true;
    since_ = now;
    switches_ = switches;
    return false;
  }

  // The loop's yield returned at `after`, with `switches` so far: its next slice starts there,
  // however long others ran.
  void yielded(time_point after, std::uint64_t switches) noexcept {
    since_ = after;
    switches_ = switches;
  }

 private:
  std::chrono::microseconds slice_;
  time_point since_;        // when the current slice began
  std::uint64_t switches_;  // the loop's context switches then
};

}  // namespace spoold
