// parker.hpp: where idle workers sleep, and how a submission wakes one. The protocol and why
// it loses no wake-up are in src/README.md ("Parking and waking").
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

#include "futex.hpp"

#if defined(__SANITIZE_THREAD__)
#define SPOOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPOOL_TSAN 1
#endif
#endif

namespace spool::detail {

class parker {
 public:
  explicit parker(std::uint32_t max_spinners = 1) noexcept : max_spinners_(max_spinners) {}

  // Spinning: an idle worker may poll for a while before sleeping, but only max_spinners at a
  // time. While anyone spins, a submission wakes nobody (the spinner will take the task), so
  // an oversubscribed pool does not fill its cores with pollers and futex calls.
  bool try_start_spinning() noexcept {
    std::uint32_t n = spinners_.load(std::memory_order_relaxed);
    while (n < max_spinners_) {
      if (spinners_.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  // A spinner that stops must then either take work it found or go through prepare() and look
  // again before parking: a submission that saw it spinning did not wake anyone.
  void stop_spinning() noexcept { spinners_.fetch_sub(1, std::memory_order_seq_cst); }

  // A worker that found no work calls prepare(), then looks for work (and any other condition
  // it waits for) once more, then either cancel()s (it found something) or park()s with the
  // key prepare() returned.
  std::uint32_t prepare() noexcept {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
#ifndef SPOOL_TSAN
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
    return epoch_.load(std::memory_order_seq_cst);
  }
  void cancel() noexcept { sleepers_.fetch_sub(1, std::memory_order_relaxed); }
  void park(std::uint32_t key) noexcept {
    futex_wait(epoch_, key);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
  // Returns false once the deadline has passed.
  bool park_until(std::uint32_t key, std::chrono::steady_clock::time_point deadline) noexcept {
    bool in_time = futex_wait_until(epoch_, key, deadline);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return in_time;
  }

  // Called after making work visible. Costs a fence and two loads when a worker spins or
  // nobody sleeps.
  void notify_one() noexcept {
#ifdef SPOOL_TSAN
    if (spinners_.fetch_add(0, std::memory_order_seq_cst) != 0) return;
    if (sleepers_.fetch_add(0, std::memory_order_seq_cst) == 0) return;
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (spinners_.load(std::memory_order_seq_cst) != 0) return;
    if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
#endif
    wake(1);
  }
  // Wakes every sleeper: shutdown, and a future completing that a worker sleeps on.
  void notify_all() noexcept { notify(INT_MAX); }

  std::uint32_t sleepers() const noexcept { return sleepers_.load(std::memory_order_relaxed); }

 private:
  void notify(int count) noexcept {
    if (sleepers_now() == 0) return;
    wake(count);
  }
  void wake(int count) noexcept {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(epoch_, count);
  }


  // The notifier's half of the Dekker pairing with prepare(): a full fence, then a plain load,
  // so a submission that finds nobody asleep never writes this shared line. ThreadSanitizer
  // does not model fences; under it, a read-modify-write of sleepers_ stands in, which is
  // also correct (it joins the release sequence of the sleepers' increments) but costlier.
  std::uint32_t sleepers_now() noexcept {
#ifdef SPOOL_TSAN
    return sleepers_.fetch_add(0, std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return sleepers_.load(std::memory_order_seq_cst);
#endif
  }

  alignas(64) std::atomic<std::uint32_t> epoch_{0};
  alignas(64) std::atomic<std::uint32_t> sleepers_{0};
  alignas(64) std::atomic<std::uint32_t> spinners_{0};
  const std::uint32_t max_spinners_;
};

}  // namespace spool::detail
