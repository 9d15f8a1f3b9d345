// gate/gate.hpp: the gate every task passes before it runs (core::execute): pause() and
// resume(), a discarding shutdown, and the task hooks (src/README.md, "Pause").
//
// State: one word of bits (discarding, paused, traced), the mutex and condition variable that
// paused workers wait on, and whether shutdown began (pause() refused from then on).
//
// Invariants:
//  - The word is 0 (open) unless a bit is set: execute()'s fast path is one acquire load.
//  - discarding is set once and never cleared; traced is set at construction, before any
//    thread starts, and never cleared; paused changes only under mu_, so a waiter that reads
//    it under mu_ (hold_while_paused) misses no resume().
//  - After stop(), pause() is refused: a shutdown's resume() is the last word on pausing.
//
// Boundary: the word is read by the worker loop (execute, execute_gated) and by range tickets
// once per chunk (a pause or a discard stops a ticket between chunks). Set bits are published
// by seq_cst read-modify-writes, so a worker that finds a task pushed after pause() returned
// sees the bit (src/README.md, "Pause").
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <system_error>

#include "spool/spool.hpp"

namespace spool::detail {

class task_gate {
 public:
  static constexpr std::uint32_t k_discarding = 1;  // shutdown(discard): cancel, do not run
  static constexpr std::uint32_t k_paused = 2;      // pause() until resume()
  // config::on_task_start or on_task_finish is set: every task takes execute_gated, which
  // calls them. Unset, the hooks cost nothing beyond the gate's one load.
  static constexpr std::uint32_t k_traced = 4;

  // Before any thread starts.
  void trace() noexcept { bits_.store(k_traced, std::memory_order_relaxed); }

  // The bits, with one acquire load: 0 means open (the fast path).
  std::uint32_t bits() const noexcept { return bits_.load(std::memory_order_acquire); }
  bool traced() const noexcept { return (bits_.load(std::memory_order_relaxed) & k_traced) != 0; }
  bool discarding() const noexcept { return (bits() & k_discarding) != 0; }
  bool paused() const noexcept { return (bits() & k_paused) != 0; }

  // Closes the gate for pause(); errc::shut_down once stop() was called. before_closing runs
  // under the lock, before the bit is set.
  template <class BeforeClosing>
  std::error_code pause(BeforeClosing before_closing) noexcept {
    std::lock_guard lock(mu_);
    if (stopping_) return errc::shut_down;
    before_closing();
    bits_.fetch_or(k_paused, std::memory_order_seq_cst);
    return {};
  }
  // Opens a paused gate and wakes the held workers; false if it was not paused. after_opening
  // runs under the lock, after the bit is cleared.
  template <class AfterOpening>
  bool resume(AfterOpening after_opening) noexcept {
    {
      std::lock_guard lock(mu_);
      if ((bits_.load(std::memory_order_relaxed) & k_paused) == 0) return false;
      bits_.fetch_and(~k_paused, std::memory_order_seq_cst);
      after_opening();
    }
    cv_.notify_all();
    return true;
  }
  // Shutdown began: later pause() calls are refused.
  void stop() noexcept {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  // Sets the discarding bit: from now on execute() drops instead of running.
  void start_discarding() noexcept { bits_.fetch_or(k_discarding, std::memory_order_seq_cst); }
  // A worker that found a task while paused waits here, holding it, until resume(). The
  // predicate reads the bit under mu_, as resume() changes it, so no opening is missed.
  void hold_while_paused() noexcept {
    if ((bits() & k_paused) == 0) return;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return (bits_.load(std::memory_order_relaxed) & k_paused) == 0; });
  }

 private:
  std::atomic<std::uint32_t> bits_{0};
  std::mutex mu_;
  std::condition_variable cv_;  // resume() or shutdown(): paused workers look again
  bool stopping_ = false;       // guarded by mu_
};

}  // namespace spool::detail
