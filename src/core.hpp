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
#include <span>
#include <thread>
#include <vector>

#include "queues/injector.hpp"
#include "sleep/parker.hpp"
#include "queues/producer_slots.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/detail/join_task.hpp"
#include "spool/detail/task.hpp"
#include "spool/spool.hpp"
#include "queues/stolen_batch.hpp"
#include "queues/ws_deque.hpp"

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

  // Tasks that left through execute() or drop(): completed + failed + cancelled.
  std::uint64_t finished(std::memory_order order) const noexcept {
    return completed.load(order) + failed.load(order) + cancelled.load(order);
  }
};

// Adds to a counter that only the calling thread writes: no read-modify-write. Release, so a
// reader that sees a later count also sees what came before it (core::quiescent).
inline void add_owned(std::atomic<std::uint64_t>& c, std::uint64_t delta) noexcept {
  c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_release);
}

// The same for a 32-bit count that only the calling thread writes, relaxed (worker::depth).
inline void add_owned32(std::atomic<std::uint32_t>& c, int delta) noexcept {
  c.store(c.load(std::memory_order_relaxed) + static_cast<std::uint32_t>(delta),
          std::memory_order_relaxed);
}

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

// A wait_target for a future's state or a fork's half (join_task): both are ready() once,
// for good, so arm() is mark_waited_by_worker() and there is nothing to withdraw.
template <class T>
class waitable final : public wait_target {
 public:
  explicit waitable(T& t) noexcept : t_(t) {}
  bool done() const noexcept override { return t_.ready(); }
  bool arm() noexcept override { return t_.mark_waited_by_worker(); }

 private:
  T& t_;
};

// A worker slot. Slots are created on demand up to max_threads and live as long as the pool;
// a retired thread's slot (its deque empty, its counters kept) is reused by a later thread.
struct worker {
  using clock = std::chrono::steady_clock;

  worker(core& o, unsigned i) : owner(o), index(i), rng(0x9E3779B97F4A7C15ull * (i + 1)) {}
  core& owner;
  const unsigned index;
  ws_deque deque;
  stolen_batch batch;  // a run of a producer slot's tasks this worker took (stolen_batch.hpp)
  std::atomic<std::uint32_t> depth{0};  // tasks this thread is running (nested when helping)
  std::uint32_t blocking = 0;           // nested blocking_regions, owner only
  counters stats;
  std::uint64_t rng;  // victim selection, owner only
  // Whose stolen batch this worker last took a task from, owner only: tried first by the next
  // steal, since a producer's run is served from one batch at a time (core::steal).
  std::size_t batch_hint = 0;

  // For the monitor: whether the thread is out of work (spinning, parked), and the thread's
  // CPU clock, to tell a busy thread on the CPU from one blocked inside its task.
  std::atomic<bool> idle{true};
  std::atomic<int> cpu_clock{k_no_clock};  // a clockid_t (thread CPU clocks are negative)
  static constexpr int k_no_clock = 0;     // CLOCK_REALTIME: never a thread's CPU clock
  std::atomic<int> tid{0};                 // the kernel's thread id, for /proc
  // Tasks this worker had finished when the timed sleeper last looked (core::note_progress).
  std::atomic<std::uint64_t> progress_seen{0};

  // Priority bookkeeping, owner only (core::find_task).
  std::uint32_t searches = 0;    // find_task calls, to look at low-priority aging now and then
  bool high_streak = false;      // the last task taken was high priority
  clock::time_point high_since;  // when that run of high-priority tasks began

  // Guarded by core::scale_mu_: a thread runs here (running), has retired and awaits its join
  // (retired), or the slot is free. `running` is mirrored in `active` for lock-free readers.
  enum class slot_state : unsigned char { free, running, retired };
  slot_state state = slot_state::free;
  std::atomic<bool> active{false};
  std::thread thread;
};

class range_ticket;

class core {
 public:
  explicit core(const config& cfg);  // starts the workers; throws spool::error(errc::system)
  ~core();                           // shutdown(drain) must have joined already
  core(const core&) = delete;
  core& operator=(const core&) = delete;

  // Takes ownership of t: it is queued, run (caller_runs), or destroyed (refused).
  std::error_code submit(task* t, priority p = priority::normal) noexcept;

  // Submits n tasks made by make(context, i), in order, stopping at the first that cannot be
  // made (null: no_memory) or is refused. See pool::try_post_bulk.
  bulk_result submit_bulk(std::size_t n, task* (*make)(void*, std::size_t), void* context) noexcept;

  // Range submissions (pool::try_post_n; src/range.cpp). takes_ranges(): whether one from
  // the calling thread goes in whole (it is a worker of this pool, or has a producer slot).
  // submit_range takes ownership of job and submits all of it, or frees it and says why not.
  bool takes_ranges() noexcept;
  bulk_result submit_range(range_job* job) noexcept;

  std::error_code wait_idle() noexcept;
  void close() noexcept;
  // errc::would_deadlock from one of this pool's workers; otherwise joins.
  std::error_code shutdown(shutdown_mode mode, std::size_t* dropped) noexcept;

  stats snapshot() const noexcept;
  std::size_t thread_count() const noexcept { return live_.load(std::memory_order_relaxed); }
  bool is_own_worker() const noexcept;

  // Help-while-waiting: runs tasks until `until` is done or the deadline passes. Only for a
  // worker of this pool. Returns until.done().
  bool help_until(wait_target& until,
                  const std::chrono::steady_clock::time_point* deadline) noexcept;

  // Fork/join on the calling worker of this pool: left(left_context) here, `right` from its
  // deque (src/join.cpp). Returns whether right ran; false if it was refused or dropped, or if
  // the caller is not this pool's worker (then only left ran).
  bool fork_join(join_task& right, join_call left, void* left_context) noexcept;

  // A worker of this pool enters or leaves a blocking_region (see spool.hpp).
  void enter_blocking(worker& w) noexcept;
  void leave_blocking(worker& w) noexcept;

  void report_exception(std::exception_ptr e) noexcept;
  parker& sleepers() noexcept { return parker_; }
  // A thread outside the pool is about to sleep (a future, a group, wait_idle): it no longer
  // takes a core, so work deferred on its account is handed to a sleeper now, not at the
  // timed sleeper's next period (src/README.md, "Deferred wake-ups").
  void outside_sleeps() noexcept;
  // For tests: submissions that deferred their wake-up, and periods at which the timed
  // sleeper took deferred work because nothing progressed or a CPU went unused.
  std::uint64_t deferred_wakes() const noexcept { return parker_.deferred(); }
  std::uint64_t rescues() const noexcept { return rescues_.load(std::memory_order_relaxed); }
  bool timed_sleeper() const noexcept { return parker_.timed_listed(); }
  // config::spin_rounds: how long idle workers, and threads waiting on a future, poll first.
  unsigned spin_rounds() const noexcept { return cfg_.spin_rounds; }
  // Whether the monitor has found the pool idle and sleeps (or is about to) without a timeout.
  // For tests.
  bool monitor_sleeping() const noexcept { return monitor_asleep_.load(std::memory_order_relaxed); }

 private:
  // Worker slots created so far; thieves and counters walk these (src/README.md, "Elastic").
  std::span<const std::unique_ptr<worker>> workers() const noexcept {
    return {workers_.get(), created_.load(std::memory_order_acquire)};
  }
  void worker_main(worker& w) noexcept;
  task* find_task(worker& w) noexcept;
  task* find_normal(worker& w) noexcept;  // own deque and batch, injector (normal), steal
  task* take_high(worker& w) noexcept;
  task* steal(worker& w) noexcept;
  // One task of `slot` for w, taking a run of them into w's batch (core::steal, "Order").
  ws_deque::steal_result take_from_slot(worker& w, producer_slot& slot) noexcept;
  bool has_work() const noexcept;
  // Polls for work (or for `done`) a while before the caller parks. True if worth another look.
  template <class Done>
  bool spin(worker& w, Done done) noexcept;
  // Called by a worker that found a task after being idle: wakes one sleeper if more is queued.
  void wake_for_surplus() noexcept;
  // Deferred wake-ups (src/README.md, "Deferred wake-ups").
  // parker_.notify_one, deferring while the pool is crowded.
  void notify_worker() noexcept {
    parker_.notify_one([this] { return crowded(0); });
  }
  // A thread outside the pool submitted: it holds a core while it goes on submitting.
  void note_outside() noexcept {
    if (outside_active_.load(std::memory_order_relaxed) == 0) {
      outside_active_.store(1, std::memory_order_relaxed);
    }
  }
  // Whether waking one more worker would crowd the CPUs: deferral is on, an outside thread
  // submitted lately, and the awake workers (not asleep, not in a blocking region, counting
  // extra_asleep more as asleep) number keep_awake_ already.
  bool crowded(std::uint32_t extra_asleep) const noexcept;
  // Live workers neither asleep in the parker (nor extra_asleep more) nor in a blocking region.
  std::uint32_t awake_workers(std::uint32_t extra_asleep) const noexcept;
  // After a task: in a crowded pool with more workers awake than it needs (keep_awake_ and
  // this one), w lists itself as a sleeper although work may be queued, and must then park
  // (with the timed role if *timed). False: nothing was done.
  bool retreat(worker& w, bool* timed) noexcept;
  // Parks w, which holds the timed role, period after period while it decides to keep
  // deferring. Returns whether a notifier chose it (parker::wake::searching).
  bool sleep_timed(worker& w) noexcept;
  // For the timed sleeper: notes each worker's finished count, and says whether a worker
  // other than `self` was running a task throughout since the last note without finishing
  // one (a task that blocks, or runs long).
  bool note_progress(const worker& self) noexcept;
  // Runs or, while discarding, cancels t; w is null for a thread outside the pool.
  void execute(worker* w, task* t) noexcept;
  // The calling thread's worker if it is one of this pool's, else null.
  worker* own_worker() const noexcept;
  // Range tickets (src/range.cpp, whose header comment gives the invariants).
  friend class range_ticket;
  outcome run_ticket(range_ticket& t) noexcept;
  // Leaves a new ticket of t's job, owning one more index, in w's deque. False if none was
  // left (no index left, no deque, or no memory: then its index ran here).
  bool leave_ticket(range_ticket& t, worker* w) noexcept;
  // Runs job's indices [lo, hi) and counts them for w (null: the outsiders' counters).
  void run_chunk(range_job& job, worker* w, std::size_t lo, std::size_t hi) noexcept;
  // Drops a ticket's reference; the last one frees the job and counts what was never claimed.
  void release_job(range_job& job, worker* w) noexcept;
  // shutdown(discard): cancels everything queued now, from the calling thread.
  void drop_queued() noexcept;
  // Cancels t and counts it as dropped (w: the counting worker, or null for any other thread).
  void drop(worker* w, task* t) noexcept;
  // A batch of n from w (this pool's worker) or else into slot: counted as submitted before
  // any of it is visible, then the closed check (shut_down if refused whole). leave_batch
  // undoes the count of the `refused` that did not go in.
  std::error_code enter_batch(worker* w, producer_slot* slot, std::size_t n) noexcept;
  void leave_batch(worker* w, producer_slot* slot, std::size_t refused) noexcept;
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

  // Elastic sizing (monitor.cpp).
  // Starts one thread in a free slot; errc::system if the OS refuses, errc::full at
  // max_threads, errc::shut_down once terminating.
  std::error_code grow(scale_event::cause why) noexcept;
  // An idle worker past keep_alive asks to retire: true if it may exit (live stays >= min).
  bool try_retire(worker& w) noexcept;
  // Joins threads that retired, freeing their slots. Takes scale_mu_.
  void join_retired() noexcept;
  void monitor_main() noexcept;
  // A worker found work after being idle: wakes the monitor if it sleeps (elastic pools).
  void became_busy(worker& w) noexcept;
  void kick_monitor() noexcept;
  // Whether every live worker is idle and nothing is queued: the monitor may sleep.
  bool pool_idle() const noexcept;
  void emit(scale_event::kind what, scale_event::cause why, unsigned index, unsigned live) noexcept;

  const config cfg_;
  const unsigned min_threads_;
  const unsigned max_threads_;
  const bool elastic_;  // max_threads_ > min_threads_: a monitor runs, idle threads retire
  injector injector_;
  producer_slots slots_;  // unbounded pools only (see producer_slots.hpp)
  parker parker_;
  // max_threads_ slots, filled in index order; [0, created_) exist (written before created_'s
  // release store, never moved or freed before the core is destroyed).
  std::unique_ptr<std::unique_ptr<worker>[]> workers_;
  std::atomic<std::uint32_t> created_{0};

  // Sizing: slot states, thread starts and joins. Never held while running a task or a
  // user callback.
  std::mutex scale_mu_;
  std::atomic<std::uint64_t> threads_started_{0};
  std::atomic<std::uint64_t> threads_retired_{0};
  std::atomic<std::uint64_t> grown_for_load_{0};
  std::atomic<std::uint64_t> grown_for_blocking_{0};

  // The monitor (elastic pools only) and how workers wake it.
  std::thread monitor_;
  std::mutex monitor_mu_;
  std::condition_variable monitor_cv_;
  bool monitor_kicked_ = false;  // guarded by monitor_mu_
  bool monitor_join_ = false;    // a thread retired: join it; guarded by monitor_mu_
  bool monitor_stop_ = false;    // guarded by monitor_mu_
  alignas(64) std::atomic<bool> monitor_asleep_{false};

  // Threads in wait_quiescent() (wait_idle, shutdown).
  alignas(64) std::atomic<std::uint32_t> idle_waiters_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;

  std::atomic<std::uint32_t> live_{0};     // threads running worker_main (changed under scale_mu_
                                           // by growth and retirement; an exit at terminate
                                           // decrements it without the lock)
  std::atomic<std::uint32_t> blocked_{0};  // workers inside a blocking_region
  std::atomic<std::uint32_t> closed_{0};   // close() or shutdown() was called
  std::atomic<bool> discarding_{false};    // shutdown(discard): cancel instead of run
  std::atomic<bool> terminate_{false};     // no task is left anywhere: workers exit
  std::atomic<std::uint64_t> dropped_{0};
  std::mutex shutdown_mu_;  // serialises shutdown(); guards joined_
  bool joined_ = false;

  // Deferred wake-ups: the CPUs this process may run on (sched_getaffinity, at construction),
  // whether an outside thread submitted since the timed sleeper's last period, and how often
  // that sleeper took deferred work.
  const std::uint32_t cpus_;
  // Awake workers that, with one outside thread, fill the CPUs: cpus_ - 1, but at least one
  // (on one CPU, deferring to nobody would leave every task to the timed sleeper's period).
  const std::uint32_t keep_awake_;
  // Deferral is on: defer_period > 0 and no more threads than CPUs. A pool given more threads
  // than CPUs was sized for tasks that block; keeping its workers asleep would undo that (and
  // at 16 threads on 2 CPUs it made spool-bench empty 12% slower).
  const bool defer_;
  alignas(64) std::atomic<std::uint32_t> outside_active_{0};
  std::atomic<std::uint64_t> rescues_{0};

  counters outside_;  // work done by threads outside the pool (read-modify-write)
  std::atomic<std::uint64_t> accepted_outside_{0};  // stats::submitted's outside share
  std::atomic<std::uint64_t> rejected_{0};
};

namespace scheduling_testing {
// For tests: pools created while this is non-zero take it as their CPU count, so that a test
// can make a pool crowded on any machine. 0 restores sched_getaffinity's count.
void set_cpus(std::uint32_t n) noexcept;
}  // namespace scheduling_testing

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
