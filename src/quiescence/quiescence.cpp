// quiescence/quiescence.cpp: the sums and the waiting (see quiescence.hpp and README.md).
#include "quiescence/quiescence.hpp"

namespace spool::detail {

bool quiescence::quiescent() const noexcept {
  // Finished first, then submitted. Each task is counted submitted before it can be counted
  // finished, and accepted tasks are never uncounted, so equal sums mean that at the moment
  // the finished counters were read, every accepted task had finished (README.md).
  // A slot created after the finished loop read the roster has counted nothing yet that the
  // submitted loop could see finished: its counters start at zero, like its thread's work.
  std::uint64_t finished = outside_.finished(std::memory_order_acquire);
  for (const auto& w : workers_.all()) finished += w->stats.finished(std::memory_order_acquire);
  std::uint64_t submitted = outside_.submitted.load(std::memory_order_acquire);
  for (const auto& w : workers_.all()) {
    submitted += w->stats.submitted.load(std::memory_order_acquire);
  }
  for (std::size_t i = 0, n = slots_.in_use(); i < n; ++i) {
    submitted += slots_[i].entered.load(std::memory_order_acquire);
  }
  return finished == submitted;
}

namespace {

// The sum of one field of every worker's counters and the outsiders'.
std::uint64_t sum(std::span<const std::unique_ptr<worker>> ws, const counters& outside,
                  std::atomic<std::uint64_t> counters::*field) {
  std::uint64_t total = (outside.*field).load(std::memory_order_relaxed);
  for (const auto& w : ws) total += (w->stats.*field).load(std::memory_order_relaxed);
  return total;
}

}  // namespace

void quiescence::fill(stats& s) const noexcept {
  // The outsiders' submitted count also counts submissions still waiting for room: only the
  // accepted ones are reported, and the outsiders' share of those is the statistics part's.
  for (const auto& w : workers_.all()) {
    if (running(*w)) ++s.threads_busy;
    s.submitted += w->stats.submitted.load(std::memory_order_relaxed);
  }
  for (std::size_t i = 0, n = slots_.in_use(); i < n; ++i) {
    s.submitted += slots_[i].accepted.load(std::memory_order_relaxed);
  }
  s.completed = sum(workers_.all(), outside_, &counters::completed);
  s.failed = sum(workers_.all(), outside_, &counters::failed);
  s.cancelled = sum(workers_.all(), outside_, &counters::cancelled);
  s.stolen = sum(workers_.all(), outside_, &counters::stolen);
}

void quiescence::notify_waiters() noexcept {
  // Wake the waiter only for a pool it will find quiescent. Every change that can make the
  // pool quiescent is followed, in its thread, by notify()'s barrier and this check; of the
  // threads making the last such changes, the one whose barrier comes last sees all of them
  // and wakes the waiter (README.md). Without the check, the tail of a burst would wake the
  // waiter once per worker going idle, only for it to sleep again.
  if (!quiescent()) return;
  std::lock_guard lock(mu_);
  cv_.notify_all();
}

void quiescence::wait() noexcept {
  waiters_.fetch_add(1, std::memory_order_seq_cst);
#ifndef SPOOL_TSAN
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return quiescent(); });
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
}

bool quiescence::wait_until(std::chrono::steady_clock::time_point deadline) noexcept {
  // The same pairing with notify() as wait().
  waiters_.fetch_add(1, std::memory_order_seq_cst);
#ifndef SPOOL_TSAN
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  bool done;
  {
    std::unique_lock lock(mu_);
    done = cv_.wait_until(lock, deadline, [this] { return quiescent(); });
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
  return done;
}

}  // namespace spool::detail
