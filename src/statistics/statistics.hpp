// statistics/statistics.hpp: the pool-wide counts that no other part keeps: tasks accepted
// from threads outside the pool, submissions refused, and tasks dropped (cancelled by a
// discarding shutdown or a range job that never ran them). The per-task counts (submitted,
// completed, failed, cancelled, stolen) are quiescence's, which needs them anyway; the
// snapshot (core::snapshot) asks each part for its share.
//
// Invariant: each count only grows, by relaxed read-modify-writes from any thread; a
// snapshot's fields are each exact but not taken at one instant (src/README.md, "Statistics").
// Written by submitters outside the pool, so the counts sit on a line of their own, off the
// lifecycle flags every submission reads.
#pragma once

#include <atomic>
#include <cstdint>

#include "spool/spool.hpp"

namespace spool::detail {

class statistics {
 public:
  void accepted_outside(std::uint64_t n = 1) noexcept {
    accepted_outside_.fetch_add(n, std::memory_order_relaxed);
  }
  void rejected(std::uint64_t n = 1) noexcept { rejected_.fetch_add(n, std::memory_order_relaxed); }
  void dropped(std::uint64_t n = 1) noexcept { dropped_.fetch_add(n, std::memory_order_relaxed); }
  // Tasks dropped so far (a shutdown reports the difference across it).
  std::uint64_t dropped_so_far() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  // Adds this part's share to a snapshot: stats::submitted's outside share (accepted ones
  // only; quiescence's outside count also holds submissions still waiting for room) and
  // stats::rejected.
  void fill(stats& s) const noexcept {
    s.submitted += accepted_outside_.load(std::memory_order_relaxed);
    s.rejected = rejected_.load(std::memory_order_relaxed);
  }

 private:
  alignas(64) std::atomic<std::uint64_t> accepted_outside_{0};
  std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace spool::detail
