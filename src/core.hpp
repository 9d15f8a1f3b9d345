// core.hpp: the pool itself, behind spool::pool and the C API. How its parts fit, and the
// invariants that keep it from losing tasks, wake-ups or threads, are in src/README.md.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "injector.hpp"
#include "parker.hpp"
#include "producer_slots.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/detail/task.hpp"
#include "spool/spool.hpp"
#include "ws_deque.hpp"

namespace spool::detail {

// Counters a single thread writes with plain load+store (no read-modify-write), so counting
// costs a worker nothing it must share; readers sum them. The pool is idle exactly when
// submitted == completed + failed + cancelled, summed over all workers and the outsiders.
struct counters {
  std::atomic<std::uint64_t> submitted{0};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> cancelled{0};
  std::atomic<std::uint64_t> stolen{0};
};

// Something a worker can wait on while it helps: a future's state, a task group. The waker
// (whoever makes done() true) must call the pool's parker notify_all() if a worker is armed;
// arm() and the waker's check pair like the parker (each side writes, then reads the other's
// word, both seq_cst), so the waiter either sees done() or is woken.
class wait_target {
 public:
  virtual bool done() const noexcept = 0;
  // Announces that the calling worker may sleep in the parker until done(). Returns true,
  // having announced nothing, if done() already holds.
  virtual bool arm() noexcept = 0;
  // Withdraws the announcement after the worker wakes (or decides not to sleep).
  virtual void disarm() noexcept {}

 protected:
  ~wait_target() = default;
};

struct worker {
  worker(core& o, unsigned i) : owner(o), index(i), rng(0x9E3779B97F4A7C15ull * (i + 1)) {}
  core& owner;
  const unsigned index;
  ws_deque deque;
  std::atomic<std::uint32_t> depth{0};  // tasks this thread is running (nested when helping)
  std::uint32_t blocking = 0;           // nested blocking_regions, owner only
  counters stats;
  std::uint64_t rng;  // victim selection, owner only
  std::thread thread;
};

class core {
 public:
  explicit core(const config& cfg);  // starts the workers; throws spool::error(errc::system)
  ~core();                           // shutdown(drain) must have joined already
  core(const core&) = delete;
  core& operator=(const core&) = delete;

  // Takes ownership of t: it is queued, run (caller_runs), or destroyed (refused).
  std::error_code submit(task* t, priority p = priority::normal) noexcept;

  std::error_code wait_idle() noexcept;
  void close() noexcept;
  // errc::would_deadlock from one of this pool's workers; otherwise joins.
  std::error_code shutdown(shutdown_mode mode, std::size_t* dropped) noexcept;

  stats snapshot() const noexcept;
  std::size_t thread_count() const noexcept { return workers_.size(); }
  bool is_own_worker() const noexcept;

  // Help-while-waiting: runs tasks until `until` is done or the deadline passes. Only for a
  // worker of this pool. Returns until.done().
  bool help_until(wait_target& until,
                  const std::chrono::steady_clock::time_point* deadline) noexcept;

  // A worker of this pool enters or leaves a blocking_region (see spool.hpp).
  void enter_blocking(worker& w) noexcept;
  void leave_blocking(worker& w) noexcept;

  void report_exception(std::exception_ptr e) noexcept;
  parker& sleepers() noexcept { return parker_; }

 private:
  void worker_main(worker& w) noexcept;
  task* find_task(worker& w) noexcept;
  task* steal(worker& w) noexcept;
  bool has_work() const noexcept;
  // Polls for work (or for `done`) a while before the caller parks. True if worth another look.
  template <class Done>
  bool spin(worker& w, Done done) noexcept;
  // Called by a worker that found a task after being idle: wakes one sleeper if more is queued.
  void wake_for_surplus() noexcept;
  // Runs or, while discarding, cancels t; w is null for a thread outside the pool.
  void execute(worker* w, task* t) noexcept;
  // shutdown(discard): cancels everything queued now, from the calling thread.
  void drop_queued() noexcept;
  // Cancels t and counts it as dropped (w: the counting worker, or null for any other thread).
  void drop(worker* w, task* t) noexcept;
  // Submission from outside the pool into the calling thread's own slot.
  std::error_code submit_to_slot(producer_slot& slot, task* t) noexcept;
  // Whether close() has been called; read after a full barrier (see submit_to_slot).
  bool closed_after_barrier() noexcept;
  // Undoes a submission's count, frees the task and reports why.
  std::error_code refuse(worker* w, task* t, std::error_code why) noexcept;
  // Adds delta to a counter: w's own (plain store, w's thread only) or the outsiders' (null).
  void tally(worker* w, std::atomic<std::uint64_t> counters::*field, std::uint64_t delta) noexcept;
  // Every accepted task has finished: nothing is queued or running.
  bool quiescent() const noexcept;
  void wait_quiescent() noexcept;
  // Called wherever the pool may have just become quiescent.
  void notify_idle_waiters() noexcept;
  void stop_workers() noexcept;

  const config cfg_;
  injector injector_;
  producer_slots slots_;  // unbounded pools only (see producer_slots.hpp)
  parker parker_;
  std::vector<std::unique_ptr<worker>> workers_;

  // Threads in wait_quiescent() (wait_idle, shutdown).
  alignas(64) std::atomic<std::uint32_t> idle_waiters_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;

  std::atomic<std::uint32_t> live_{0};   // worker threads started and not yet exited
  std::atomic<std::uint32_t> blocked_{0};  // workers inside a blocking_region
  std::atomic<std::uint32_t> closed_{0};  // close() or shutdown() was called
  std::atomic<bool> discarding_{false};  // shutdown(discard): cancel instead of run
  std::atomic<bool> terminate_{false};   // no task is left anywhere: workers exit
  std::atomic<std::uint64_t> dropped_{0};
  std::mutex shutdown_mu_;               // serialises shutdown(); guards joined_
  bool joined_ = false;

  counters outside_;  // work done by threads outside the pool (read-modify-write)
  std::atomic<std::uint64_t> accepted_outside_{0};  // stats::submitted's outside share
  std::atomic<std::uint64_t> rejected_{0};
};

// The pool worker running on this thread, if any.
worker* current_worker() noexcept;

// spool_blocking_begin/end and spool::blocking_region: mark the calling worker (if any) as
// blocked, and back. Returns the worker marked, or null off a pool worker.
worker* blocking_begin() noexcept;
void blocking_end() noexcept;

// The core behind a spool::pool, for the library's own layers (task groups, algorithms).
struct pool_access {
  static core& of(pool& p) noexcept { return *p.core_; }
};

}  // namespace spool::detail
