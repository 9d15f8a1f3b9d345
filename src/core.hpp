// core.hpp: the pool behind spool::pool and the C API. It owns one of each part and is where
// they meet: submission (submit.cpp), the worker loop and help-while-waiting
// (worker/loop.cpp), and the lifecycle and the statistics snapshot (core.cpp). src/README.md
// is the map.
//
// Parts, each a member that owns its state:
//   workers_  worker/worker.hpp       the worker slots created so far
//   queues_   queues/queues.hpp       the injector, the producer slots, the search for a task
//   threads_  elastic/sizer.hpp       live threads: growth, retirement, the monitor
//   sleep_    sleep/sleep.hpp         spinning, parking, waking, deferred wake-ups
//   idle_     quiescence/quiescence.hpp  counting, and waiting for every task to finish
//   timers_   timers/timers.hpp       delayed and periodic tasks: the timer heap and its thread
//   gate_     gate/gate.hpp           the gate every task passes: pause, discarding, task hooks
//   counts_   statistics/statistics.hpp  the pool-wide counts: accepted outside, rejected, dropped
//
// Lifecycle: running -> [timers stopped (shutdown: timers_.stop)] -> closed (close: outside
// submissions refused) -> [discarding] -> quiescent -> terminate (threads_.begin_stop) ->
// joined. Workers exit only on terminate, which is set only once the pool is quiescent, so no
// task is lost (src/README.md, "Shutdown").
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stop_token>
#include <system_error>

#include "elastic/sizer.hpp"
#include "gate/gate.hpp"
#include "queues/queues.hpp"
#include "quiescence/quiescence.hpp"
#include "sleep/sleep.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/detail/join_task.hpp"
#include "spool/detail/work_item.hpp"
#include "spool/spool.hpp"
#include "statistics/statistics.hpp"
#include "timers/timers.hpp"
#include "worker/isolation.hpp"
#include "worker/wait_target.hpp"
#include "worker/worker.hpp"

namespace spool::detail {

class range_ticket;

class core {
 public:
  // Starts the workers; throws spool::error(errc::system). Made by create_core (lifetime/),
  // which gives it the stamp of its life.
  core(const config& cfg, std::uint32_t stamp);
  ~core();  // shutdown(drain) must have joined already; destroy_core (lifetime/) calls it
  core(const core&) = delete;
  core& operator=(const core&) = delete;

  // ---- Submission (submit.cpp) ----

  // Takes ownership of t: it is queued, run (caller_runs), or destroyed (refused).
  std::error_code submit(work_item* t, priority p = priority::normal) noexcept;
  // Submits n tasks made by make(context, i), in order, stopping at the first that cannot be
  // made (null: no_memory) or is refused. See pool::try_post_bulk.
  bulk_result submit_bulk(std::size_t n, work_item* (*make)(void*, std::size_t),
                          void* context) noexcept;
  // Range submissions (pool::try_post_n; api/range.cpp). takes_ranges(): whether one from the
  // calling thread goes in whole (it is a worker of this pool, or has a producer slot).
  // submit_range takes ownership of job and submits all of it, or frees it and says why not.
  bool takes_ranges() noexcept;
  bulk_result submit_range(range_job* job) noexcept;
  // A due timer's task, from the timer thread (timers/): counted as an outside submission,
  // pushed into the injector past any bound (the timer thread must never wait for room, and
  // a refused due timer would lose its run), so it is refused only after close() (errc::
  // shut_down, checked after the count as submit_to_slot does) or for
  // memory. Never blocks; on refusal t stays the caller's, for it to report the error.
  std::error_code submit_due(work_item* t, priority p) noexcept;

  // The pool's timer queue (timers/timers.hpp).
  timers& timer_queue() noexcept { return timers_; }

  // ---- Lifecycle and statistics (core.cpp) ----

  std::error_code wait_idle() noexcept;
  // Refuses outside submissions from now on. Pairs Dekker-style with a producer-slot submission
  // (submit_to_slot, enter_batch, submit_due): the submitter counts the task in its slot, then
  // reads closed_ after light_barrier(); close() sets closed_ by a seq_cst read-modify-write,
  // takes heavy_barrier(), and a shutdown then reads the counts (quiescence::wait). Either the
  // submitter sees the flag and backs out, or the shutdown sees the count and waits for the
  // task (sync/dekker.hpp: the submitter pays no fence; close() pays a membarrier).
  void close() noexcept;
  // errc::would_deadlock from one of this pool's workers; otherwise joins. *dropped: tasks
  // and timers dropped (shutdown_report::dropped).
  std::error_code shutdown(shutdown_mode mode, std::size_t* dropped) noexcept;
  // As above; a drain with a deadline discards what is still queued when it passes (timers
  // not due by then are dropped at once). Fills *report (may be null).
  std::error_code shutdown(shutdown_mode mode,
                           const std::chrono::steady_clock::time_point* deadline,
                           shutdown_report* report) noexcept;
  stats snapshot() const noexcept;
  // pool::resize, pause, resume, paused, wait_idle_for (core.cpp).
  std::error_code resize(unsigned min_threads, unsigned max_threads) noexcept;
  std::error_code pause() noexcept;
  void resume() noexcept;
  bool paused() const noexcept { return gate_.paused(); }
  // errc::would_deadlock from a worker; otherwise *idle says whether the pool became idle
  // before the deadline.
  std::error_code wait_idle_until(std::chrono::steady_clock::time_point deadline,
                                  bool* idle) noexcept;
  std::size_t thread_count() const noexcept { return threads_.live(); }
  bool is_own_worker() const noexcept { return own_worker() != nullptr; }
  void report_exception(const std::exception_ptr& e,
                        thrown_by source = thrown_by::posted_task) noexcept;

  // ---- Workers (worker/loop.cpp) ----

  // The body of every worker thread (started by the sizer).
  void run_worker(worker& w) noexcept;
  // Help-while-waiting: runs tasks until `until` is done or the deadline passes. Only for a
  // worker of this pool. Returns until.done().
  bool help_until(wait_target& until,
                  const std::chrono::steady_clock::time_point* deadline) noexcept;
  // Fork/join on the calling worker of this pool: left(left_context) here, `right` from its
  // deque (api/join.cpp). Returns whether right ran; false if it was refused or dropped, or
  // if the caller is not this pool's worker (then only left ran).
  bool fork_join(join_task& right, join_call left, void* left_context) noexcept;
  // A worker of this pool enters or leaves a blocking_region (see spool.hpp).
  void enter_blocking(worker& w) noexcept { threads_.enter_blocking(w); }
  void leave_blocking(worker& w) noexcept { threads_.leave_blocking(w); }

  // ---- For the API faces (futures, task groups) ----

  // Stopped when shutdown begins (pool::get_stop_token).
  std::stop_token stop_token() const noexcept { return stop_.get_token(); }

  // This pool as its futures and continuations refer to it (lifetime/).
  pool_ref ref() noexcept { return {this, stamp_}; }
  // The C++ face of this pool (spool::this_pool): the pool object that owns it, or the face a
  // C pool or the default pool keeps. Set once by that face's constructor.
  pool* face() const noexcept { return face_; }
  void set_face(pool* p) noexcept { face_ = p; }
  // The C pool that owns this core (spool_this_pool), or null for a C++ pool.
  spool_pool* c_face() const noexcept { return c_face_; }
  void set_c_face(spool_pool* p) noexcept { c_face_ = p; }
  // The pool whose task the calling thread, not a worker, runs now (its own task taken back,
  // caller_runs), else null (worker/loop.cpp).
  static core* running_outside() noexcept;

  // A thread outside the pool about to wait on t's result: if t is still queued at the front
  // of that thread's own producer slot, takes it back and runs it here (queues::take_back;
  // src/README.md, "An outside waiter runs its own task"). True if it ran (or was dropped).
  bool run_own_task(work_item* t) noexcept;
  // Whether the calling thread is inside a run_own_task of this pool: a wait_idle, shutdown
  // or destruction from there would wait for the task it is called from (would_deadlock).
  bool runs_own_task_here() const noexcept;

  // Wakes this pool's workers that sleep waiting on a future, a group or a fork's half (the
  // waker's half of wait_target's pairing: call it after making done() true).
  void wake_waiting_workers() noexcept { sleep_.wake_all(); }
  // A thread outside the pool is about to sleep (sleep_control::outside_sleeps).
  void outside_sleeps() noexcept { sleep_.outside_sleeps(); }
  // config::spin_rounds: how long idle workers, and threads waiting on a future, poll first.
  unsigned spin_rounds() const noexcept { return cfg_.spin_rounds; }

 private:
  friend class range_ticket;
  friend struct core_testing;

  // The calling thread's worker if it is one of this pool's, else null.
  worker* own_worker() const noexcept {
    worker* w = current_worker();
    return w != nullptr && &w->owner == this ? w : nullptr;
  }

  // Submission (submit.cpp).
  // A batch of n from w (this pool's worker) or else into slot: counted as submitted before
  // any of it is visible, then the closed check (shut_down if refused whole). leave_batch
  // undoes the count of the `refused` that did not go in.
  std::error_code enter_batch(worker* w, producer_slot* slot, std::size_t n) noexcept;
  void leave_batch(worker* w, producer_slot* slot, std::size_t refused) noexcept;
  // Submission from outside the pool into the calling thread's own slot.
  std::error_code submit_to_slot(producer_slot& slot, work_item* t) noexcept;
  // A bounded pool's slot submission: reserves room in the injector's count (or applies the
  // full-queue policy), then submit_to_slot.
  std::error_code submit_bounded_to_slot(producer_slot& slot, work_item* t) noexcept;
  // caller_runs on a full queue: runs t on the submitting thread, which counted it.
  std::error_code run_in_caller(work_item* t) noexcept;
  // block and block_for: polls the bound for room before the producer sleeps; true with the
  // room reserved.
  bool poll_for_room(injector& shared) noexcept;
  bool blocks_when_full() const noexcept {
    return cfg_.on_full == full_policy::block || cfg_.on_full == full_policy::block_for;
  }
  // Whether close() has been called; read after light_barrier(), the frequent side of the
  // pairing with close() (see close()).
  bool closed_after_barrier() noexcept { return load_after_light_barrier(closed_) != 0; }
  // Undoes a submission's count, frees the task and reports why.
  std::error_code refuse(worker* w, work_item* t, std::error_code why) noexcept;

  // The worker loop (worker/loop.cpp).
  // Runs t on w, which found it; if w was idle, it passes surplus work on first (found_work).
  // Inline: every task a worker finds goes through here, and the check is one load.
  void take(worker& w, work_item* t) noexcept {
    if (threads_.idle(w)) found_work(w);
    execute(&w, t);
  }
  // w found work after being idle: the sizer is told, and surplus work is passed on.
  void found_work(worker& w) noexcept;
  // After a task, if sleep_.may_retreat(): a crowded pool's extra worker leaves queued work to
  // others and sleeps.
  void retreat(worker& w, bool& searching) noexcept;
  // w gives the timer watch back if it holds it (timers::unwatch).
  void unwatch_timers(worker& w) noexcept;
  // No task, and spinning gave up: announce, look once more, then sleep, retire or exit.
  enum class rest_end : unsigned char { looked, retired, terminate };
  rest_end rest(worker& w, bool& searching) noexcept;
  // Runs or, while discarding, cancels t; w is null for a thread outside the pool. While the
  // pool is paused it first waits for resume() (or a discarding shutdown).
  void execute(worker* w, work_item* t) noexcept;
  // execute() when the gate is not open: paused, discarding, or traced.
  void execute_gated(worker* w, work_item* t) noexcept;
  // Runs t (in its isolation region, counted as running on w) and returns how it ended.
  outcome run_task(worker* w, work_item* t) noexcept;
  // Counts a task that ran as completed, failed or cancelled (w: null outside the pool).
  void tally_outcome(worker* w, outcome how) noexcept;
  // What help_until runs: any task, or inside an isolation region only that region's and the
  // task waited for itself (last_look: the look after prepare(), see queues::find_isolated).
  work_item* find_for_wait(worker& w, const work_item* direct, bool last_look = false) noexcept {
    return in_region(w) ? queues_.find_isolated(w, wait_match(w, direct), !last_look)
                        : queues_.find_task(w);
  }
  // Part of execute_gated: false if t was dropped (discarding), true once it may run (after
  // waiting out a pause).
  bool pass_gate(worker* w, work_item* t) noexcept;

  // Range tickets (api/range.cpp, whose header comment gives the invariants).
  outcome run_ticket(range_ticket& t) noexcept;
  // Leaves a new ticket of t's job, owning one more index, in w's deque. False if none was
  // left (no index left, no deque, or no memory: then its index ran here).
  bool leave_ticket(range_ticket& t, worker* w) noexcept;
  // Runs job's indices [lo, hi) and counts them for w (null: the outsiders' counters).
  void run_chunk(range_job& job, worker* w, std::size_t lo, std::size_t hi) noexcept;
  // Drops a ticket's reference; the last one frees the job and counts what was never claimed.
  void release_job(range_job& job, worker* w) noexcept;

  // Shutdown (core.cpp).
  // Cancels t and counts it as dropped (w: the counting worker, or null for any other thread).
  void drop(worker* w, work_item* t) noexcept;
  // Outside threads only: sleeps until every accepted task has finished.
  void wait_quiescent() noexcept;
  void stop_workers() noexcept;

  const config cfg_;
  const std::uint32_t stamp_;
  pool* face_ = nullptr;
  spool_pool* c_face_ = nullptr;
  const unsigned min_threads_;
  const unsigned max_threads_;
  roster workers_;
  queues queues_;
  sizer threads_;
  sleep_control sleep_;
  quiescence idle_;
  timers timers_;

  // Read on every submission and every task; written only by close() and shutdown().
  alignas(64) std::atomic<std::uint32_t> closed_{0};  // close() or shutdown() was called
  // The gate every task passes in execute() (gate/gate.hpp): on the flags' line, one load.
  task_gate gate_;
  bool discarding() const noexcept { return gate_.discarding(); }
  std::stop_source stop_;   // pool::get_stop_token; stopped by shutdown()
  std::mutex shutdown_mu_;  // serialises shutdown(); guards joined_
  bool joined_ = false;
  // The pool-wide counts (statistics/statistics.hpp), on a line of their own.
  statistics counts_;
};

// spool_blocking_begin/end and spool::blocking_region: mark the calling worker (if any) as
// blocked, and back. Returns the worker marked, or null off a pool worker.
worker* blocking_begin() noexcept;
void blocking_end() noexcept;

// The core behind a spool::pool, for the library's own layers (task groups, algorithms).
struct pool_access {
  static core& of(pool& p) noexcept { return *p.core_; }
};

}  // namespace spool::detail
