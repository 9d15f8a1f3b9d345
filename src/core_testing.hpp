// core_testing.hpp: what tests may look at inside a pool, and the knobs they may turn.
// The pool itself never reads these; only tests include this header.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "core.hpp"
#include "queues/queues_testing.hpp"
#include "sleep/sleep_testing.hpp"

namespace spool::detail {

struct core_testing {
  // Submissions that deferred their wake-up (sleep/README.md, "Deferred wake-ups").
  static std::uint64_t deferred_wakes(const core& c) noexcept {
    return c.sleep_.parker_.deferred();
  }
  // Periods at which the timed sleeper took deferred work because a worker made no progress.
  static std::uint64_t rescues(const core& c) noexcept {
    return c.sleep_.rescues_.load(std::memory_order_relaxed);
  }
  // Workers listed as sleepers in c's parker.
  static std::uint32_t sleepers(const core& c) noexcept { return c.sleep_.parker_.sleepers(); }
  // Whether a listed sleeper holds the timed role.
  static bool timed_sleeper(const core& c) noexcept { return c.sleep_.parker_.timed_listed(); }
  // Whether the calling thread holds a producer slot of c (without claiming one).
  static bool has_producer_slot(const core& c) noexcept {
    return c.queues_.slots().cached() != nullptr;
  }
  // Whether the calling thread's producer slot of c says its owner takes its tasks back
  // (producer_slot::takes_back); false without a slot.
  static bool takes_back(const core& c) noexcept {
    const producer_slot* slot = c.queues_.slots().cached();
    return slot != nullptr && slot->takes_back;
  }
  // Producer slots claimed so far, given back or not ([0, in_use()) are searched).
  static std::size_t producer_slots_in_use(const core& c) noexcept {
    return c.queues_.slots().in_use();
  }
  // The room of a bounded pool's queue in use: tasks in the injector and in producer slots
  // that no worker has taken (queues/README.md, "The bound"); 0 for an unbounded pool.
  static std::size_t bound_in_use(const core& c) noexcept { return c.queues_.shared().in_use(); }
  // Timers waiting in the pool's timer queue.
  static std::size_t pending_timers(core& c) noexcept { return c.timer_queue().pending(); }
  // The worker holding the timer watch (timers/README.md), or -1; and whether the timer
  // thread sleeps only as its backstop (its wait past the earliest deadline).
  static int timer_watcher(const core& c) noexcept {
    std::lock_guard lock(c.timers_.mu_);
    return c.timers_.watcher_ == timers::k_no_watcher ? -1 : static_cast<int>(c.timers_.watcher_);
  }
  static bool timer_thread_backs_up(const core& c) noexcept {
    std::lock_guard lock(c.timers_.mu_);
    return c.timers_.thread_wait_ == timers::thread_wait::backstop;
  }
  // A knob: no worker takes the timer watch before `until`, as after a takeover by the
  // thread (timers.hpp, k_pause_min). A time already past ends a pause.
  static void pause_timer_watch(core& c, std::chrono::steady_clock::time_point until) noexcept {
    std::lock_guard lock(c.timers_.mu_);
    c.timers_.watch_resumes_ = until;
  }
  // Whether the monitor has found the pool idle and sleeps (or is about to) without a timeout.
  static bool monitor_sleeping(const core& c) noexcept {
    return c.threads_.monitor_asleep_.load(std::memory_order_relaxed);
  }
};

}  // namespace spool::detail
