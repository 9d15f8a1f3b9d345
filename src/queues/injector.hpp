// queues/injector.hpp: the bounded queue through which threads outside the pool hand it work (the
// paper's producer-consumer queue), with one FIFO per priority level. Producers that find it
// full wait, time out, or are told so, by policy; workers never wait on it (they sleep in the
// parker), so the only condition variable here is "not full", for producers.
//
// The bound counts every level together. Submissions from the pool's own workers at a
// non-normal priority come here too, and bypass the bound (a worker must never wait on it).
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

  bool full_locked() const noexcept { return capacity_ != 0 && count_ >= capacity_; }
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
  std::size_t blocked_ = 0;                  // producers waiting on not_full_, guarded by mu_
  bool closed_ = false;                      // guarded by mu_
  std::atomic<std::size_t> size_{0};         // count_, readable without the lock
  std::atomic<std::uint32_t> level_size_[k_levels] = {};
  std::atomic<clock::rep> oldest_low_{clock::time_point::max().time_since_epoch().count()};
};

}  // namespace spool::detail
