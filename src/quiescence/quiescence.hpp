// quiescence/quiescence.hpp: whether every accepted task has finished, and waiting for that
// (wait_idle, shutdown).
//
// State: the outsiders' counters and the threads waiting for quiescence. The workers'
// counters live in their slots (worker.hpp) and the producer slots' in theirs; this part reads
// them all and writes only through tally().
//
// Invariants (the argument is in quiescence/README.md):
//  - A task is counted submitted before it becomes visible (undone only if refused) and
//    finished only after it left the pool, so at every instant finished <= submitted.
//  - quiescent() reads every finished count, then every submitted count: equality means that
//    when the finished counts were read, every accepted task had finished.
//
// Boundary with every part that can make the pool quiescent (the worker loop going idle, a
// drop, a refusal, a caller-runs task): that part calls notify() after its change. notify()
// and wait() pair Dekker-style on `waiters_` (each side writes its own word, then reads the
// other's after a full barrier): a waiter either sees the change or is seen by the notifier.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "queues/producer_slots.hpp"
#include "quiescence/counters.hpp"
#include "spool/spool.hpp"
#include "sync/dekker.hpp"
#include "worker/worker.hpp"

namespace spool::detail {

class quiescence {
 public:
  quiescence(const roster& workers, const producer_slots& slots) noexcept
      : workers_(workers), slots_(slots) {}

  // Adds delta to a counter: w's own (plain store; w's thread only) or, for a null w, the
  // outsiders' (read-modify-write).
  void tally(worker* w, std::atomic<std::uint64_t> counters::*field, std::uint64_t delta) noexcept {
    if (w != nullptr) {
      // Only w's thread writes its counters; a reader that sees a task counted as finished
      // also sees it counted as submitted (quiescent()).
      add_owned(w->stats.*field, delta);
    } else {
      (outside_.*field).fetch_add(delta, std::memory_order_seq_cst);
    }
  }

  // Every accepted task has finished: nothing is queued or running.
  bool quiescent() const noexcept;
  // Sleeps until quiescent(). Only for threads outside the pool.
  void wait() noexcept;
  // As wait(), until the deadline at most: whether the pool was quiescent.
  bool wait_until(std::chrono::steady_clock::time_point deadline) noexcept;
  // Called wherever the pool may have just become quiescent: a fence and a load when nobody
  // waits.
  void notify() noexcept {
    if (load_after_full_barrier(waiters_) == 0) return;
    notify_waiters();
  }

  // Adds the per-task counts to a snapshot: tasks running, submitted (accepted from workers
  // and producer slots), completed, failed, cancelled, stolen. Relaxed: each field exact, not
  // all at one instant (src/README.md, "Statistics").
  void fill(stats& s) const noexcept;
  // What the idle paths read of a worker's counts (its own idle spin; the timed sleeper, of
  // the others): the tasks it has finished (run, failed, cancelled or dropped), and whether it
  // is running one now. Relaxed loads: each is a hint, read again at the next decision.
  std::uint64_t finished_by(const worker& w) const noexcept {
    return w.stats.finished(std::memory_order_relaxed);
  }
  bool running(const worker& w) const noexcept {
    return w.depth.load(std::memory_order_relaxed) != 0;
  }
  // On w's thread only: w begins and ends running a task (nested when it helps while it
  // waits), and w took a task from another worker or a producer slot. Plain stores of w's own
  // counts (add_owned), as tally() makes them; inline, since they run once per task.
  static void task_begins(worker& w) noexcept { add_owned32(w.depth, +1); }
  static void task_ends(worker& w) noexcept { add_owned32(w.depth, -1); }
  static void stole(worker& w) noexcept { add_owned(w.stats.stolen, 1); }

 private:
  void notify_waiters() noexcept;

  const roster& workers_;
  const producer_slots& slots_;
  counters outside_;  // work done by threads outside the pool (read-modify-write)
  alignas(64) std::atomic<std::uint32_t> waiters_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace spool::detail
