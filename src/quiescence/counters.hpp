// quiescence/counters.hpp: task counts that cost a worker nothing it must share.
//
// Each worker counts, in its own `counters` and with plain load+store (no read-modify-write),
// the tasks it submitted and the tasks that left the pool through it; threads outside the
// pool share one set, with fetch_add. Readers sum them (quiescence.hpp, core::snapshot).
// The pool is idle exactly when submitted == completed + failed + cancelled, summed over all
// workers, the outsiders and the producer slots' `entered`.
#pragma once

#include <atomic>
#include <cstdint>

namespace spool::detail {

struct counters {
  std::atomic<std::uint64_t> submitted{0};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> cancelled{0};
  std::atomic<std::uint64_t> stolen{0};

  // Tasks that left through execute() or drop(): completed + failed + cancelled.
  std::uint64_t finished(std::memory_order order) const noexcept {
    return completed.load(order) + failed.load(order) + cancelled.load(order);
  }
};

// Adds to a counter that only the calling thread writes: no read-modify-write. Release, so a
// reader that sees a later count also sees what came before it (quiescence::quiescent).
inline void add_owned(std::atomic<std::uint64_t>& c, std::uint64_t delta) noexcept {
  c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_release);
}

// The same for a 32-bit count that only the calling thread writes, relaxed (worker::depth).
inline void add_owned32(std::atomic<std::uint32_t>& c, int delta) noexcept {
  c.store(c.load(std::memory_order_relaxed) + static_cast<std::uint32_t>(delta),
          std::memory_order_relaxed);
}

}  // namespace spool::detail
