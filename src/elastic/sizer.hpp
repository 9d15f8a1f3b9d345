// elastic/sizer.hpp: how many threads the pool runs. Threads start (grow) for the pool's
// first min_threads, when a worker enters a blocking_region with too few others free, and when
// the monitor sees work waiting while too few workers are running; an idle worker above
// min_threads retires after keep_alive. The design note is elastic/README.md.
//
// State: the counts of live and blocked threads, each slot's thread (thread_slot.hpp), the
// scaling statistics, the `terminate` flag, and the monitor thread (elastic pools only).
//
// Invariants:
//  - live stays within [min_threads, max_threads]: growth checks max and retirement checks
//    min, both under scale_mu_, which no thread holds while running a task or a callback.
//    resize() changes the bounds under scale_mu_; until the threads catch up, live may lie
//    outside the new bounds: resize() itself starts threads up to the new min, and threads
//    above the new max retire as each finds no work (never below min).
//  - After begin_stop() (under scale_mu_) no thread starts or retires: every slot's thread is
//    the stopper's to join.
//  - A thread is counted live before it exists and undone if the OS refuses it, so anything
//    it does (and whoever learns of it) comes after the count.
//
// Boundary with the worker loop: a worker flips its idle flag only on the idle<->busy
// transition (went_idle, went_busy). went_busy and the monitor going to sleep pair
// Dekker-style on the worker's `idle` flag and `monitor_asleep_`: the worker clears its flag,
// then (after a full barrier) reads the monitor's; the monitor sets its own, then reads every
// worker's flag. One of them sees the other (elastic/README.md, "The monitor sleeps").
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>

#include "spool/spool.hpp"
#include "worker/worker.hpp"

namespace spool::detail {

class queues;
struct core_testing;

class sizer {
 public:
  sizer(const config& cfg, unsigned min_threads, unsigned max_threads, unsigned capacity,
        roster& workers, const queues& work) noexcept;
  sizer(const sizer&) = delete;
  sizer& operator=(const sizer&) = delete;

  bool elastic() const noexcept {
    return max_threads_.load(std::memory_order_relaxed) >
           min_threads_.load(std::memory_order_relaxed);
  }

  // Starts one thread in a free slot; errc::system if the OS refuses, errc::full at
  // max_threads, errc::no_memory if no slot can be made, errc::shut_down once terminating.
  std::error_code grow(scale_event::cause why) noexcept;
  // Starts the monitor (elastic pools only). Throws std::system_error if the OS refuses.
  void start_monitor();

  // pool::resize: sets the bounds (errc::invalid_argument unless 1 <= lo <= hi <= capacity,
  // errc::shut_down once terminating), starts the monitor if the pool became elastic, then
  // starts threads up to lo. The caller wakes the sleepers afterwards, so that threads above
  // the new bounds look at them (over_max, retire_at).
  std::error_code resize(unsigned lo, unsigned hi) noexcept;
  // More threads live than max_threads: an idle worker retires at once (cause::resize).
  bool over_max() const noexcept {
    return live_.load(std::memory_order_relaxed) > max_threads_.load(std::memory_order_relaxed);
  }
  // Stops the monitor from growing the pool (pause: held workers look stalled) or lets it.
  void hold_growth(bool held) noexcept { growth_held_.store(held, std::memory_order_relaxed); }

  // The calling worker's thread begins, and ends (having retired, or at terminate).
  void thread_began(worker& w) noexcept;
  void thread_ends(worker& w, bool retired) noexcept;

  // The worker ran out of work / found work while idle(w) (it must then also pass surplus
  // work on, sleep_control::wake_for_surplus).
  void went_idle(worker& w) noexcept {
    w.thread.was_idle = true;
    w.thread.idle.store(true, std::memory_order_relaxed);
    if (elastic()) w.thread.idle_since = std::chrono::steady_clock::now();
  }
  void went_busy(worker& w) noexcept {
    w.thread.was_idle = false;
    if (elastic()) wake_monitor_for(w);
  }
  bool idle(const worker& w) const noexcept { return w.thread.was_idle; }

  // Above min_threads an idle worker sleeps at most until retire_at(w), then asks to retire:
  // try_retire is true if it may exit (live stays >= min_threads).
  bool may_retire() const noexcept {
    return elastic() &&
           live_.load(std::memory_order_relaxed) > min_threads_.load(std::memory_order_relaxed);
  }
  // A fixed pool does not note when its workers go idle, so after a resize the keep_alive
  // counts from the resize at the earliest.
  std::chrono::steady_clock::time_point retire_at(const worker& w) const noexcept {
    const auto since =
        std::max(w.thread.idle_since, thread_slot::clock::time_point(thread_slot::clock::duration(
                                          resized_at_.load(std::memory_order_relaxed))));
    return since + keep_alive_;
  }
  // why: cause::idle (above min_threads, idle for keep_alive) or cause::resize (over_max()).
  bool try_retire(worker& w, scale_event::cause why = scale_event::cause::idle) noexcept;

  // A worker enters or leaves a blocking_region (see spool.hpp).
  void enter_blocking(worker& w) noexcept;
  void leave_blocking(worker& w) noexcept {
    if (--w.thread.blocking == 0) blocked_.fetch_sub(1, std::memory_order_relaxed);
  }

  std::uint32_t live() const noexcept { return live_.load(std::memory_order_relaxed); }
  std::uint32_t blocked() const noexcept { return blocked_.load(std::memory_order_relaxed); }

  // No task is left anywhere: workers exit. Read by workers before they sleep (seq_cst: it
  // pairs with the parker's announcement, like a submission).
  bool terminating() const noexcept { return terminate_.load(std::memory_order_seq_cst); }
  // Shutdown, once the pool is quiescent: sets terminate; then, after the sleepers were woken,
  // stop() stops the monitor and joins every thread.
  void begin_stop() noexcept;
  void stop() noexcept;

  // The sizing fields of a statistics snapshot.
  void fill(stats& s) const noexcept;

  // config::on_worker_start / on_worker_stop, on the worker's own thread; exceptions are
  // reported to stderr and ignored.
  void call_worker_hook(const std::function<void(unsigned)>& hook, unsigned index,
                        const char* which) noexcept;

 private:
  friend struct core_testing;

  // went_busy's half of the pairing with the monitor (monitor.cpp).
  void wake_monitor_for(worker& w) noexcept;
  void kick_monitor() noexcept;
  void monitor_main() noexcept;
  // Whether every live worker is idle and nothing is queued: the monitor may sleep.
  bool pool_idle() const noexcept;
  // Joins threads that retired, freeing their slots. Takes scale_mu_.
  void join_retired() noexcept;
  void emit(scale_event::kind what, scale_event::cause why, unsigned index, unsigned live) noexcept;

  const config& cfg_;
  // The bounds: changed only by resize(), under scale_mu_; read without it by the idle path
  // and the monitor (a stale read costs one more look, never a thread below min: try_retire
  // and grow check them again under the lock).
  std::atomic<unsigned> min_threads_;
  std::atomic<unsigned> max_threads_;
  const unsigned capacity_;  // worker slots: the most max_threads_ may become
  // When resize() last changed the bounds (steady_clock ticks since its epoch); 0 if never.
  std::atomic<thread_slot::clock::rep> resized_at_{0};
  std::atomic<bool> growth_held_{false};
  const std::chrono::nanoseconds keep_alive_;
  roster& workers_;
  const queues& work_;

  // Slot states, thread starts and joins. Never held while running a task or a user callback.
  std::mutex scale_mu_;
  std::atomic<std::uint64_t> threads_started_{0};
  std::atomic<std::uint64_t> threads_retired_{0};
  std::atomic<std::uint64_t> grown_for_load_{0};
  std::atomic<std::uint64_t> grown_for_blocking_{0};
  // Threads running a worker loop (changed under scale_mu_ by growth and retirement; an exit
  // at terminate decrements it without the lock), and those inside a blocking_region.
  std::atomic<std::uint32_t> live_{0};
  std::atomic<std::uint32_t> blocked_{0};
  std::atomic<bool> terminate_{false};

  // The monitor (elastic pools only) and how workers wake it.
  std::thread monitor_;
  std::mutex monitor_mu_;
  std::condition_variable monitor_cv_;
  bool monitor_kicked_ = false;  // guarded by monitor_mu_
  bool monitor_join_ = false;    // a thread retired: join it; guarded by monitor_mu_
  bool monitor_stop_ = false;    // guarded by monitor_mu_
  alignas(64) std::atomic<bool> monitor_asleep_{false};
};

}  // namespace spool::detail
