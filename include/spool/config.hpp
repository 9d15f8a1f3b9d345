// spool/config.hpp: how a pool is built (spool::config) and what its hooks are told: the full
// queue's policy, scaling events, the task a tracing hook sees.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace spool {

// What a submission from outside the pool does when the bounded queue is full.
enum class full_policy {
  block,           // wait for room (the paper's behaviour); errc::shut_down if the pool closes
  block_for,       // wait up to config::block_timeout, then errc::timed_out
  reject,          // fail at once with errc::full
  caller_runs,     // run the task in the submitting thread
  discard_oldest,  // drop the oldest queued task (its future reports cancellation) and enqueue
};

// A change in the number of worker threads, as told to config::on_scale.
struct scale_event {
  enum class kind : unsigned char { started, retired };
  enum class cause : unsigned char {
    initial,   // started with the pool (min_threads of them)
    load,      // the monitor saw work waiting and no worker making progress
    blocking,  // a worker entered a blocking_region
    idle,      // idle for keep_alive with more than min_threads live
    shutdown,  // the pool shut down
    resize,    // pool::resize raised min_threads, or lowered max_threads below the live count
  };
  kind what;
  cause why;
  unsigned worker_index;  // the thread's this_worker_index()
  unsigned threads_live;  // live threads after the change
};

// A task as the tracing hooks see it (config::on_task_start, on_task_finish).
struct task_info {
  const char* name;  // the name its callable was given with spool::named, or null
  int worker_index;  // this_worker_index() of the thread running it: -1 for a thread outside
};
// How a task ended, for config::on_task_finish: returned, threw, or did not run its work (it
// was cancelled before it started: a future's cancel(), a stop token, a cancelled group).
enum class task_end : unsigned char { completed, failed, cancelled };

struct config {
  // Worker threads of a fixed-size pool; 0 means std::thread::hardware_concurrency().
  unsigned threads = 0;
  // Elastic sizing: the pool starts min_threads threads and grows up to max_threads. 0 means
  // `threads` (resolved as above), so leaving both at 0 gives a fixed pool of `threads`.
  // Requires 1 <= min_threads <= max_threads, else errc::invalid_argument.
  unsigned min_threads = 0;
  unsigned max_threads = 0;
  // A thread above min_threads that has been idle this long retires (and is joined).
  std::chrono::nanoseconds keep_alive = std::chrono::seconds(10);
  // While any worker is busy, the monitor checks for starvation every monitor_min_interval,
  // backing off (doubling) to monitor_max_interval while nothing needs doing. While the pool
  // is idle the monitor sleeps without a timeout. Only elastic pools have a monitor.
  std::chrono::nanoseconds monitor_min_interval = std::chrono::milliseconds(1);
  std::chrono::nanoseconds monitor_max_interval = std::chrono::milliseconds(50);
  // Called on every thread start and retirement, from the thread that causes it (a worker,
  // the monitor, or the thread constructing or shutting down the pool). Keep it short; it
  // must not throw (an exception is reported to stderr and ignored) or call into the pool's
  // sizing (blocking_region) itself.
  std::function<void(const scale_event&)> on_scale = {};
  // A low-priority task that has waited this long runs before normal work, and a worker that
  // has run only high-priority tasks for this long takes one normal task: nothing starves.
  // 0 turns aging off (strict priorities).
  std::chrono::nanoseconds aging = std::chrono::milliseconds(100);
  // Bound on tasks queued from outside the pool that no worker has taken yet; 0 means
  // unbounded. A full queue gets on_full. A worker takes a run of up to 32 of one outside
  // thread's tasks at a time, which leave the bound then: with W workers at most
  // queue_capacity + W * min(31, queue_capacity - 1) outside tasks wait to start.
  std::size_t queue_capacity = 0;
  full_policy on_full = full_policy::block;
  // How long full_policy::block_for waits for room.
  std::chrono::nanoseconds block_timeout = std::chrono::seconds(1);
  // Prefix for the workers' thread names ("<name>-<index>", cut to 15 characters).
  std::string name = "spool";
  // Receives exceptions thrown by tasks given to post(). Empty: print to stderr. Either way the
  // task is counted in stats::failed. Runs on the worker that ran the task.
  std::function<void(std::exception_ptr)> on_exception = {};
  // Rounds an idle worker polls for work before it sleeps (each round is a look at the
  // queues after a few pause instructions, or after sched_yield() past the first 8), and a
  // thread outside the pool polls a future before it sleeps on it, or a full queue (block,
  // block_for) for room. Polling buys round-trip
  // latency with CPU time: a task that arrives while a worker polls, or a result that arrives
  // while its waiter polls, costs no futex wake-up (BENCHMARKS.md, `latency`, has the trade
  // measured). A worker that ran a single task after an idle spell longer than about a
  // whole poll (sparse work, such as timers) polls only the first 8 rounds next time; one
  // short spell restores the whole count. At most one worker fewer than the CPUs (at least
  // one) polls at once; the others sleep at once. 0 sleeps at once.
  unsigned spin_rounds = 64;
  // Deferred wake-ups. While a thread outside the pool keeps submitting and the awake workers
  // plus that thread already fill the CPUs this process may use, a submission does not wake
  // another worker: the extra thread would only take a core from the submitter or from the
  // worker running its tasks. One sleeper then parks with this period instead of for good and
  // at each period takes the queued work if no task finished in it or the process left a CPU
  // unused (a task blocked, the submitter went to sleep), so a deferred task waits at most
  // about one period behind a stalled worker. An idle pool keeps no such sleeper. Only pools
  // with no more threads (max_threads) than CPUs defer: more threads than CPUs is a choice
  // for tasks that block. 0 turns deferral off: every submission that finds the workers busy
  // and one asleep wakes it.
  std::chrono::microseconds defer_period = std::chrono::milliseconds(1);

  // ---- Worker hooks, placement, run-time bounds ----
  // Called on each worker thread itself, with its index (this_worker_index()): on_worker_start
  // before the thread runs its first task (after its name and CPU affinity are set), and
  // on_worker_stop after its last, when it retires or the pool shuts down. Every thread that
  // starts, elastic growth included, gets exactly one of each. For thread-local set-up,
  // naming, tracing. In on_worker_start the thread is already the pool's worker (a task it
  // submits goes to its own deque); in on_worker_stop it no longer is (a submission goes in
  // as from outside, and is refused once the pool is shutting down). Neither may call the
  // pool's resize(), pause(), resume(), wait_idle() or shutdown(), nor destroy it. An exception
  // is reported to stderr and ignored, as on_scale's.
  std::function<void(unsigned worker_index)> on_worker_start = {};
  std::function<void(unsigned worker_index)> on_worker_stop = {};
  // Task hooks, for tracing: called on the thread that runs a task, on_task_start just before
  // it and on_task_finish just after, with the task's name (spool::named) and the thread's
  // worker index. Every task that starts is reported (submit, post, continuations, timers'
  // runs, group tasks, a range's chunks, coroutine resumptions; a task an outside waiter or
  // caller_runs runs on its own thread too), so a start and its finish pair up on one thread
  // and nest when a waiting task helps; a task dropped unrun by a shutdown is not. Not a fork
  // taken back and run in place by its own forking task (it is part of that task). Unset,
  // they cost nothing: the check is folded into a load every task makes anyway. They must
  // not block or call into the pool's lifecycle; an exception is reported to stderr and
  // ignored, as the worker hooks'.
  std::function<void(const task_info&)> on_task_start = {};
  std::function<void(const task_info&, task_end)> on_task_finish = {};
  // CPU ids to pin the workers to: worker i runs only on affinity[i % affinity.size()] (so
  // the list is used round-robin; allowed_cpus() gives every CPU this process may use). Empty:
  // workers are not pinned. An id outside the process's CPU set (sched_getaffinity) gives
  // errc::invalid_argument at construction. Pinned workers steal first from workers whose
  // CPUs share a core, then a last-level cache, then a NUMA node, when libspool was built with
  // hwloc (spool::topology_aware() says); otherwise every victim is equally near.
  std::vector<unsigned> affinity = {};
  // The most threads pool::resize() may ever allow: worker slots for this many are set aside
  // at construction. 0 means max_threads. Must be >= max_threads.
  unsigned thread_capacity = 0;

  // ---- Timers at shutdown ----
  // What shutdown(drain) and the destructor do with pending timers (src/timers/README.md):
  // one-shot timers due within this long of the shutdown still fire and run; the rest, and
  // every periodic timer, are dropped (a submit_after future reports task_cancelled, a C
  // timer's on_cancel is called) and counted in shutdown()'s result. So a drain waits on the
  // clock at most this long: 0 (the default) runs only timers already due and never waits.
  // Must be >= 0.
  std::chrono::nanoseconds drain_timers_within = std::chrono::nanoseconds::zero();
};

}  // namespace spool
