// queues/injector.hpp: the bounded queue through which threads outside the pool hand it work (the
// paper's producer-consumer queue), with one FIFO per priority level. Producers that find it
// full wait, time out, or are told so, by policy; workers never wait on it (they sleep in the
// parker), so the only condition variable here is "not full", for producers.
//
// The bound counts every level together, and the tasks that threads outside a bounded pool
// queued in their producer slots (queues/README.md, "The bound"): one count of the room in
// use, `used_`, taken by a compare-and-swap that never passes the capacity and given back by
// whoever takes a task out (release()). Submissions from the pool's own workers at a
// non-normal priority come here too, and bypass the bound (a worker must never wait on it):
// they are counted, so later outside submissions see them, but never refused.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

#include "spool/detail/work_item.hpp"
#include "spool/error.hpp"
#include "spool/spool.hpp"

namespace spool::detail {

class injector {
 public:
  using clock = std::chrono::steady_clock;

  injector(std::size_t capacity, full_policy policy, std::chrono::nanoseconds timeout) noexcept
      : capacity_(capacity), policy_(policy), timeout_(timeout) {}
  ~injector();  // cancels anything left (only possible if the pool never ran it)

  struct push_result {
    std::error_code error;  // empty on success
    work_item* evicted;     // discard_oldest: the task pushed out, for the caller to cancel
  };
  // Enqueues t at level p, or reports why not (errc::full also for caller_runs: the caller
  // runs it). Never takes ownership of t on failure. bypass_bound: a worker's submission,
  // never refused for room and never waiting.
  push_result push(work_item* t, priority p = priority::normal, bool bypass_bound = false) noexcept;

  // The bound shared with the producer slots of a bounded pool (README.md, "The bound").
  bool bounded() const noexcept { return capacity_ != 0; }
  // Room for one task, if the bound has it: a compare-and-swap on the count, so concurrent
  // reservations never pass the capacity, and a full count is never a false "full".
  bool try_reserve() noexcept {
    std::size_t used = used_.load(std::memory_order_seq_cst);
    do {
      if (used >= capacity_) return false;
    } while (!used_.compare_exchange_weak(used, used + 1, std::memory_order_seq_cst));
    return true;
  }
  // Waits, by the policy (block or block_for), for room for one task and reserves it: {} with
  // the room reserved, errc::timed_out, or errc::shut_down once close() was called.
  std::error_code wait_for_room() noexcept {
    std::unique_lock lock(mu_);
    return wait_for_room_locked(lock);
  }
  // n tasks reserved with try_reserve() or wait_for_room() left the slots (a worker took
  // them, or a drain, or the submitter took one back), or were never queued. Wakes producers
  // waiting for room. Nothing for an unbounded injector.
  //
  // Dekker pairing with wait_for_room(): the releaser lowers the count and then reads
  // blocked_; a waiter raises blocked_ (under mu_) and then reads the count (try_reserve),
  // all sequentially consistent. So either the waiter sees the room, or the releaser sees the
  // waiter and notifies it under mu_, which the waiter holds from that read until it waits.
  void release(std::size_t n) noexcept {
    if (capacity_ == 0) return;
    used_.fetch_sub(n, std::memory_order_seq_cst);
    if (blocked_.load(std::memory_order_seq_cst) != 0) wake_blocked(n);
  }
  // The room in use now: queued tasks plus reservations (statistics and tests).
  std::size_t in_use() const noexcept { return used_.load(std::memory_order_relaxed); }
  // Whether the bound is reached now (a hint: a producer about to wait stops taking a core).
  bool full() const noexcept {
    return capacity_ != 0 && used_.load(std::memory_order_relaxed) >= capacity_;
  }

  // The oldest task of the highest non-empty level.
  work_item* pop() noexcept;
  // The oldest task of exactly level p.
  work_item* pop(priority p) noexcept;

  // The oldest task of level p that `region` matches (a walk under the lock).
  work_item* pop_isolated(priority p, region_match region) noexcept;

  // Refuses every later push and wakes blocked producers with errc::shut_down.
  void close() noexcept;
  bool closed() const noexcept;

  std::size_t size() const noexcept { return size_.load(std::memory_order_seq_cst); }
  bool empty() const noexcept { return size() == 0; }
  // Tasks queued at level p; a hint read without the lock.
  std::uint32_t queued(priority p) const noexcept {
    return level_size_[index(p)].load(std::memory_order_relaxed);
  }
  // When the oldest low-priority task was queued (clock::time_point::max() if none).
  clock::time_point oldest_low() const noexcept {
    return clock::time_point(clock::duration(oldest_low_.load(std::memory_order_relaxed)));
  }

 private:
  static constexpr int k_levels = 3;
  static constexpr int index(priority p) noexcept { return static_cast<int>(p); }

  struct fifo {
    work_item* head = nullptr;
    work_item* tail = nullptr;
  };

  // The room a task of the FIFOs held goes back when it is taken (not for an unbounded one).
  void unreserve_locked() noexcept {
    if (capacity_ != 0) used_.fetch_sub(1, std::memory_order_seq_cst);
  }
  // Room for a producer that waits (under mu_): the predicate of not_full_'s waits.
  bool room_locked() noexcept { return closed_ || try_reserve(); }
  std::error_code wait_for_room_locked(std::unique_lock<std::mutex>& lock) noexcept;
  void wake_blocked(std::size_t n) noexcept;
  void append_locked(work_item* t, int level) noexcept;
  work_item* take_locked(int level) noexcept;
  work_item* take_highest_locked() noexcept;
  work_item* evict_locked() noexcept;  // the oldest task of the lowest non-empty level
  void publish_oldest_low_locked() noexcept;

  const std::size_t capacity_;
  const full_policy policy_;
  const std::chrono::nanoseconds timeout_;

  mutable std::mutex mu_;
  std::condition_variable not_full_;
  fifo levels_[k_levels];                    // guarded by mu_
  std::deque<clock::time_point> low_since_;  // enqueue times of the low level, guarded by mu_
  std::size_t count_ = 0;                    // guarded by mu_
  bool closed_ = false;                      // guarded by mu_
  std::atomic<std::size_t> size_{0};         // count_, readable without the lock
  std::atomic<std::uint32_t> level_size_[k_levels] = {};
  std::atomic<clock::rep> oldest_low_{clock::time_point::max().time_since_epoch().count()};
  // The room in use: tasks of the FIFOs and tasks reserved for producer slots (bounded only).
  // On a line of its own with blocked_, which every release() reads after it: the producers
  // and the workers taking runs from their slots write it, and nothing else is near.
  alignas(64) std::atomic<std::size_t> used_{0};
  std::atomic<std::size_t> blocked_{0};  // producers waiting on not_full_, written under mu_
};

}  // namespace spool::detail
