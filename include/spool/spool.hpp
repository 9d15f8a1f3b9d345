// spool/spool.hpp: the C++ API of libspool, a producer-consumer thread pool.
//
//   spool::pool pool{spool::config{.threads = 4, .queue_capacity = 1024}};
//   auto answer = pool.submit([](int x) { return x * 2; }, 21);   // spool::future<int>
//   pool.post([] { do_something(); });                            // fire and forget
//   int v = answer.get();                                          // 42
//   pool.wait_idle();
//
// Hazards, stated where you will read them:
//  - Submissions from outside the pool go through a bounded queue (config::queue_capacity)
//    and obey config::on_full. Submissions made by a task running on the pool go to that
//    worker's own deque and are never bounded, so recursive submission cannot deadlock.
//  - wait_idle(), shutdown() and the destructor block; called from one of the pool's own
//    workers they would wait for themselves, so they throw spool::error(errc::would_deadlock)
//    instead (the destructor, which cannot throw, terminates the program with a message).
//  - Waiting on a future from a worker runs other tasks meanwhile (help while waiting), so
//    the waiting task's stack can grow by the depth of what it helps with.
//  - Continuations that run inline (then_inline, or any continuation whose pool refuses it
//    or is gone) run on the thread that completes their source: keep them short and do not
//    block in them.
//  - Futures, promises and coroutines may outlive their pool; task groups and timers' pools
//    must outlive calls on the groups (spool/task_group.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "spool/detail/future_state.hpp"
#include "spool/detail/stop.hpp"
#include "spool/detail/task.hpp"
#include "spool/error.hpp"
#include "spool/future.hpp"
#include "spool/priority.hpp"
#include "spool/timer.hpp"

struct spool_pool;  // a pool of the C API (spool/spool.h), which keeps a C++ face

namespace spool {

namespace detail {
struct pool_access;  // library-internal access to a pool's core
}

// What a submission from outside the pool does when the bounded queue is full.
enum class full_policy {
  block,           // wait for room (the paper's behaviour); errc::shut_down if the pool closes
  block_for,       // wait up to config::block_timeout, then errc::timed_out
  reject,          // fail at once with errc::full
  caller_runs,     // run the task in the submitting thread
  discard_oldest,  // drop the oldest queued task (its future reports cancellation) and enqueue
};

enum class shutdown_mode {
  drain,    // refuse new work, run everything already queued, join the threads
  discard,  // refuse new work, drop everything queued (futures report cancellation), join
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
  // Bound on tasks queued from outside the pool; 0 means unbounded.
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
  // thread outside the pool polls a future before it sleeps on it. Polling buys round-trip
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

// What shutdown_until() and shutdown_for() did.
struct shutdown_report {
  // Tasks dropped without running: queued when the deadline passed, and pending timers.
  std::size_t dropped = 0;
  // Of those, timers: one-shot timers not due by the deadline, and periodic ones.
  std::size_t timers_dropped = 0;
  // The deadline passed with tasks still queued or running: the queued ones were dropped,
  // the running ones finished (a task is never interrupted; one that takes a std::stop_token
  // sees the pool's stop requested).
  bool timed_out = false;
};

// A snapshot of the pool's counters. Each field is read atomically, but the fields are not
// read at one instant, so under load they need not add up exactly.
struct stats {
  std::uint64_t threads_live = 0;        // worker threads that exist
  std::uint64_t threads_busy = 0;        // workers running a task now
  std::uint64_t queued = 0;              // tasks waiting in the queue and the deques
  std::uint64_t submitted = 0;           // tasks accepted
  std::uint64_t completed = 0;           // tasks that ran and returned normally
  std::uint64_t failed = 0;              // tasks that ran and threw
  std::uint64_t rejected = 0;            // submissions refused (full, timed out, shut down)
  std::uint64_t stolen = 0;              // tasks a worker took from another worker's deque
  std::uint64_t cancelled = 0;           // tasks dropped without running
  std::uint64_t threads_blocked = 0;     // workers inside a blocking_region now
  std::uint64_t threads_started = 0;     // threads started, the initial ones included
  std::uint64_t threads_retired = 0;     // threads that retired idle (shutdown not counted)
  std::uint64_t grown_for_load = 0;      // of threads_started: started by the monitor
  std::uint64_t grown_for_blocking = 0;  // of threads_started: compensating a blocking_region
};

// What a bulk submission did: the first `accepted` tasks were taken; `error` says why the rest
// (if any) were not. The callable whose submission was refused has been destroyed (it was
// already in its task); those after it are untouched.
struct bulk_result {
  std::size_t accepted = 0;
  std::error_code error;
};

class pool {
 public:
  explicit pool(config cfg = {});
  // Drains: runs everything queued, then joins (shutdown(shutdown_mode::drain)).
  ~pool();
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;

  // Runs f(args...) on the pool. Throws spool::error if the submission is refused, with
  // errc::invalid_argument for a null function (pointer, member pointer, empty std::function).
  // An f that takes a std::stop_token before its arguments is called as f(token, args...)
  // with the pool's token (get_stop_token()): stop is requested when the pool's shutdown
  // begins.
  template <class F, class... Args>
  [[nodiscard]] auto submit(F&& f, Args&&... args) -> future<detail::call_result_t<F, Args...>> {
    return submit(priority::normal, std::forward<F>(f), std::forward<Args>(args)...);
  }
  // As above, at priority p.
  template <class F, class... Args>
  [[nodiscard]] auto submit(priority p, F&& f, Args&&... args)
      -> future<detail::call_result_t<F, Args...>> {
    using result = detail::call_result_t<F, Args...>;
    detail::check_callable(f);
    if constexpr (detail::takes_stop_token_v<std::decay_t<F>, std::decay_t<Args>...>) {
      return submit_call<result>(
          p, bind(std::forward<F>(f), get_stop_token(), std::forward<Args>(args)...));
    } else {
      return submit_call<result>(p, bind(std::forward<F>(f), std::forward<Args>(args)...));
    }
  }

  // ---- Stop tokens: cancellation that a std::stop_token requests ----
  // submit(token, f, args...): as submit(f, args...), but a stop requested on `token` before
  // the task starts cancels it, as future::cancel() would: the future reports
  // task_cancelled at once, the callable is released, the queued task is dropped when a
  // worker meets it (stats::cancelled). Once the task has started, a stop request does not
  // interrupt it: an f that takes a std::stop_token first receives `token` and may stop
  // early. Any std::stop_token works: a std::stop_source's, a task_group's
  // (task_group::get_stop_token), this pool's (get_stop_token, stopped when shutdown
  // begins), a std::jthread's.
  template <class F, class... Args>
  [[nodiscard]] auto submit(std::stop_token token, F&& f, Args&&... args)
      -> future<detail::call_result_t<F, Args...>> {
    return submit(priority::normal, std::move(token), std::forward<F>(f),
                  std::forward<Args>(args)...);
  }
  template <class F, class... Args>
  [[nodiscard]] auto submit(priority p, std::stop_token token, F&& f, Args&&... args)
      -> future<detail::call_result_t<F, Args...>> {
    using result = detail::call_result_t<F, Args...>;
    detail::check_callable(f);
    auto make = [&]() {
      if constexpr (detail::takes_stop_token_v<std::decay_t<F>, std::decay_t<Args>...>) {
        return bind(std::forward<F>(f), token, std::forward<Args>(args)...);
      } else {
        return bind(std::forward<F>(f), std::forward<Args>(args)...);
      }
    };
    auto call = make();
    auto* t = new detail::stoppable_future_task<decltype(call), result>(ref(), std::move(token),
                                                                        std::move(call));
    detail::state<result>* s = t;
    throw_if_error(enqueue(t, p));
    return future<result>(s);
  }
  // post(token, f): as post(f), but skipped (counted cancelled, the callable destroyed) if
  // `token` is stopped when a worker takes the task; an f that takes a std::stop_token
  // receives `token`.
  template <class F>
  void post(std::stop_token token, F&& f) {
    throw_if_error(try_post(priority::normal, std::move(token), std::forward<F>(f)));
  }
  template <class F>
  void post(priority p, std::stop_token token, F&& f) {
    throw_if_error(try_post(p, std::move(token), std::forward<F>(f)));
  }
  template <class F>
  [[nodiscard]] std::error_code try_post(std::stop_token token, F&& f) noexcept {
    return try_post(priority::normal, std::move(token), std::forward<F>(f));
  }
  template <class F>
  [[nodiscard]] std::error_code try_post(priority p, std::stop_token token, F&& f) noexcept {
    if (detail::is_null_callable(f)) return errc::invalid_argument;
    detail::task* t;
    try {
      if constexpr (detail::takes_stop_token_v<std::decay_t<F>>) {
        auto call = bind(std::forward<F>(f), token);
        t = new detail::stoppable_post_task<decltype(call)>(std::move(token), std::move(call));
      } else {
        t = new detail::stoppable_post_task<std::decay_t<F>>(std::move(token), std::forward<F>(f));
      }
    } catch (...) {
      return errc::no_memory;
    }
    return enqueue(t, p);
  }
  // The pool's stop token: stop is requested when its shutdown begins (shutdown(),
  // shutdown_until(), the destructor), before anything is dropped or drained. Tasks and
  // coroutines given it learn that the pool is going away (see submit(token, ...) and
  // spool::start in spool/coro.hpp).
  std::stop_token get_stop_token() const noexcept;

  // Runs f() on the pool without a future. An exception it throws goes to
  // config::on_exception. Throws spool::error if the submission is refused.
  template <class F>
  void post(F&& f) {
    throw_if_error(try_post(priority::normal, std::forward<F>(f)));
  }
  template <class F>
  void post(priority p, F&& f) {
    throw_if_error(try_post(p, std::forward<F>(f)));
  }

  // As post(), but reports a refusal as an error code instead of throwing.
  template <class F>
  [[nodiscard]] std::error_code try_post(F&& f) noexcept {
    return try_post(priority::normal, std::forward<F>(f));
  }
  template <class F>
  [[nodiscard]] std::error_code try_post(priority p, F&& f) noexcept {
    if (detail::is_null_callable(f)) return errc::invalid_argument;
    detail::task* t;
    try {
      if constexpr (detail::takes_stop_token_v<std::decay_t<F>>) {
        auto call = bind(std::forward<F>(f), get_stop_token());
        t = new detail::post_task<decltype(call)>(std::move(call));
      } else {
        t = new detail::post_task<std::decay_t<F>>(std::forward<F>(f));
      }
    } catch (...) {
      return errc::no_memory;
    }
    return enqueue(t, p);
  }

  // Bulk submission, fire and forget: one task per element of [first, last) (each a callable
  // taking no arguments, moved into its task), or n tasks calling f(i) for i in [0, n). From
  // a thread outside an unbounded pool, or from a worker, the batch pays for one shutdown
  // check and one wake-up instead of one per task; elsewhere (a bounded queue) the tasks go
  // in one by one with the usual policy. Stops at the first refusal (see bulk_result).
  template <std::forward_iterator It>
  [[nodiscard]] bulk_result try_post_bulk(It first, It last) noexcept {
    using F = std::decay_t<std::iter_reference_t<It>>;
    auto make = [](void* at, std::size_t) noexcept -> detail::task* {
      It& it = *static_cast<It*>(at);
      try {
        auto* t = new detail::post_task<F>(std::move(*it));
        ++it;
        return t;
      } catch (...) {
        return nullptr;
      }
    };
    return enqueue_bulk(static_cast<std::size_t>(std::distance(first, last)), make, &first);
  }
  // post_n on a pool that takes it in one piece (from a worker, or from outside an unbounded
  // pool) copies f once and the workers share that copy: they call it at the same time,
  // through a const reference, taking the indices in chunks, so the cost per task is a call
  // (src/api/range.cpp). The batch takes one place in the queue: its tasks start in index order
  // on each worker, and a task submitted after the batch may start before the batch's last
  // chunk does. A callable that cannot be called as const goes in as n tasks, each with a
  // copy of its own.
  template <class F>
  [[nodiscard]] bulk_result try_post_n(std::size_t n, const F& f) noexcept {
    if (detail::is_null_callable(f)) return {0, errc::invalid_argument};
    auto make = [](void* fn, std::size_t i) noexcept -> detail::task* {
      const F& g = *static_cast<const F*>(fn);
      try {
        return new detail::post_task<call_with_index<F>>(call_with_index<F>{g, i});
      } catch (...) {
        return nullptr;
      }
    };
    void* context = const_cast<void*>(static_cast<const void*>(&f));
    if constexpr (std::is_invocable_v<const F&, std::size_t>) {
      if (n > 1 && takes_ranges()) {
        detail::range_job* job;
        try {
          job = new detail::range_job_of<F>(n, f);
        } catch (...) {
          return {0, errc::no_memory};
        }
        return enqueue_range(job);
      }
    }
    return enqueue_bulk(n, make, context);
  }
  // As above; throws spool::error if not every task was accepted (the first
  // bulk_result::accepted were; the message says how many).
  template <std::forward_iterator It>
  void post_bulk(It first, It last) {
    throw_if_partial(try_post_bulk(first, last));
  }
  template <class F>
  void post_n(std::size_t n, const F& f) {
    throw_if_partial(try_post_n(n, f));
  }

  // ---- Delayed and periodic tasks (src/timers/README.md) ----
  // A timer waits in the pool's timer queue (one thread, "<name>-tmr", started by the first
  // timer) until its deadline, then its task is submitted at priority p like an outside
  // submission, except that it never waits for room: a due timer enters a full bounded
  // queue past its bound. Once the pool is closed, a due timer is refused: post_after's and
  // post_every's callables then report spool::error(errc::shut_down) to config::on_exception
  // (called on the timer thread), submit_after's future reports it. Shutdown: drain waits for every
  // pending one-shot timer to come due and run, and stops periodic ones; discard drops every
  // pending timer (its future reports task_cancelled). wait_idle() does not wait for timers that
  // are not yet due. A pending timer is not counted in stats until it is due. Throws spool::error
  // (errc::shut_down once shutdown has begun, errc::system if the timer thread cannot start,
  // errc::invalid_argument for a period <= 0).

  // Runs f() once, `delay` from now (a delay <= 0: as soon as the timer thread sees it).
  template <class F>
  [[nodiscard]] timer post_after(std::chrono::nanoseconds delay, F&& f) {
    return post_after(priority::normal, delay, std::forward<F>(f));
  }
  template <class F>
  [[nodiscard]] timer post_after(priority p, std::chrono::nanoseconds delay, F&& f) {
    return schedule(p, detail::deadline_after(delay), {}, std::forward<F>(f));
  }
  // Runs f() once at `when` (steady_clock).
  template <class F, class Duration>
  [[nodiscard]] timer post_at(std::chrono::time_point<std::chrono::steady_clock, Duration> when,
                              F&& f, priority p = priority::normal) {
    return schedule(p, std::chrono::time_point_cast<std::chrono::steady_clock::duration>(when), {},
                    std::forward<F>(f));
  }
  // Runs f() every `period`, the first time one period from now, until the timer is
  // cancelled or the pool shuts down. Runs never overlap: the next deadline is set when a
  // run ends, on the grid start + k * period, skipping any grid point already past (a run
  // that takes longer than the period makes the next one late, not doubled). An exception
  // from f goes to config::on_exception and the timer goes on.
  template <class F>
  [[nodiscard]] timer post_every(std::chrono::nanoseconds period, F&& f,
                                 priority p = priority::normal) {
    if (period.count() <= 0) throw error(errc::invalid_argument, "spool: post_every period <= 0");
    return schedule(p, detail::deadline_after(period), period, std::forward<F>(f));
  }
  // Runs f(args...) once, `delay` from now; the future reports its result. future::cancel()
  // before the deadline takes it out of the timer queue at once.
  template <class F, class... Args>
  [[nodiscard]] auto submit_after(std::chrono::nanoseconds delay, F&& f, Args&&... args)
      -> future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> {
    return submit_after(priority::normal, delay, std::forward<F>(f), std::forward<Args>(args)...);
  }
  template <class F, class... Args>
  [[nodiscard]] auto submit_after(priority p, std::chrono::nanoseconds delay, F&& f, Args&&... args)
      -> future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> {
    using result = std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>;
    detail::check_callable(f);
    auto call = bind(std::forward<F>(f), std::forward<Args>(args)...);
    auto* t = new detail::delayed_task<decltype(call), result>(ref(), std::move(call));
    t->deadline = detail::deadline_after(delay);
    t->prio = p;
    if (std::error_code ec = detail::timer_schedule(*core_, *t)) {
      t->destroy();
      throw_if_error(ec);
    }
    return future<result>(static_cast<detail::state<result>*>(t));
  }

  // Blocks until no task is queued or running. The pool stays usable.
  void wait_idle();

  // Stops accepting submissions from outside the pool and returns at once; queued tasks still
  // run. (tpool_shutdown's behaviour.) A later shutdown() or the destructor joins.
  // close(), shutdown(), shutdown_until() and shutdown_for() on default_pool() throw
  // spool::error(errc::invalid_argument): that pool ends only at exit.
  void close();

  // Refuses new work, then runs (drain) or drops (discard) what is queued, waits for running
  // tasks, and joins the workers. Returns how many tasks were dropped, pending timers included
  // (a drain runs the timers due within config::drain_timers_within and drops the rest).
  // Safe to call twice (the second returns 0).
  std::size_t shutdown(shutdown_mode mode = shutdown_mode::drain);
  // A drain with a deadline: timers due by the deadline run, the others are dropped at once;
  // queued tasks run until the deadline, and whatever is still queued then is dropped (as by
  // shutdown(discard)); tasks running then finish. Joins. The report says what was dropped.
  shutdown_report shutdown_until(std::chrono::steady_clock::time_point deadline);
  template <class Rep, class Period>
  shutdown_report shutdown_for(const std::chrono::duration<Rep, Period>& timeout) {
    return shutdown_until(
        detail::deadline_after(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout)));
  }

  stats statistics() const noexcept;
  // Live worker threads now (between min_threads and max_threads for an elastic pool).
  std::size_t thread_count() const noexcept;
  // True if the calling thread is one of this pool's workers.
  bool is_worker() const noexcept;

  // ---- Run-time control ----
  // Changes the elastic bounds to [min_threads, max_threads]. Threads start at once up to the
  // new min_threads (scale_event::cause::resize). Above the new max_threads, each thread
  // retires the next time it finds no work (cause::resize): a running task is never
  // interrupted, so a busy pool may stay above max until its queued work runs out. Between
  // the bounds, idle threads retire after keep_alive as usual. Throws spool::error with
  // errc::invalid_argument unless 1 <= min_threads <= max_threads <= config::thread_capacity
  // (the bounds are then unchanged), errc::shut_down after shutdown, errc::system if a thread
  // could not be started (the bounds are changed all the same).
  void resize(unsigned min_threads, unsigned max_threads);
  // Pause: from its return until resume(), no task starts. Running tasks finish; submissions
  // are still accepted and queued (the bound and its policy apply; caller_runs waits for
  // resume). Each worker that finds a task meanwhile holds it and waits; on resume() every
  // held and queued task runs. While paused, wait_idle() returns only if nothing is queued or
  // running (else at resume, once the work is done) and wait_idle_for() times out. A task
  // that waits inside (a future, a group) for a task not yet started waits until resume.
  // shutdown() and the destructor resume a paused pool first (drain runs the queued tasks,
  // discard drops them), so they never hang on a pause; pause() after shutdown has begun
  // throws spool::error(errc::shut_down). Pausing twice is the same as once. Fork/join's
  // second half, run by its own forking task, is part of that task, not a new one.
  void pause();
  void resume() noexcept;
  bool paused() const noexcept;
  // As wait_idle(), for at most `timeout`: true if the pool became idle, false if tasks were
  // still queued or running when the time ran out. errc::would_deadlock from a worker.
  bool wait_idle_for(std::chrono::nanoseconds timeout);

 private:
  friend class task_group;  // submits its own task type (spool/task_group.hpp)
  friend struct detail::pool_access;

  template <class R, class C>
  future<R> submit_call(priority p, C&& call) {
    auto* t = new detail::future_task<std::decay_t<C>, R>(ref(), std::forward<C>(call));
    detail::state<R>* s = t;
    throw_if_error(enqueue(t, p));
    return future<R>(s);
  }
  // The callable a task holds: f with its arguments bound (a named f keeps its name outside,
  // where the task finds it).
  template <class F, class... Args>
  static auto bind(F&& f, Args&&... args) {
    if constexpr (detail::is_named_v<F>) {
      const char* name = f.name;
      auto inner = bind(std::forward<F>(f).fn, std::forward<Args>(args)...);
      return detail::named_fn<decltype(inner)>{name, std::move(inner)};
    } else {
      return
          [fn = std::forward<F>(f), ... as = std::forward<Args>(args)]() mutable -> decltype(auto) {
            return std::invoke(std::move(fn), std::move(as)...);
          };
    }
  }
  std::error_code enqueue(detail::task* t, priority p = priority::normal) noexcept;
  // errc::invalid_argument on default_pool(), which ends only at exit.
  void refuse_if_default() const;
  template <class F>
  timer schedule(priority p, std::chrono::steady_clock::time_point deadline,
                 std::chrono::nanoseconds period, F&& f) {
    detail::check_callable(f);
    auto* e = new detail::timer_entry_of<std::decay_t<F>>(*core_, period, std::forward<F>(f));
    e->deadline = deadline;
    e->prio = p;
    if (std::error_code ec = detail::timer_schedule(*core_, *e)) {
      e->end(detail::timer_entry::ending::unscheduled, ec);
      e->release();
      e->release();
      throw_if_error(ec);
    }
    return timer(e);
  }
  bulk_result enqueue_bulk(std::size_t n, detail::task* (*make)(void*, std::size_t),
                           void* context) noexcept;
  static void throw_if_partial(const bulk_result& r);
  // Whether a range submission from this thread would go in as one piece (see try_post_n).
  bool takes_ranges() const noexcept;
  // Takes ownership of job: submits it whole, or frees it and reports why not.
  bulk_result enqueue_range(detail::range_job* job) noexcept;

  template <class F>
  struct call_with_index {
    F fn;
    std::size_t index;
    void operator()() { fn(index); }
  };
  static void throw_if_error(std::error_code ec) {
    if (ec) throw error(static_cast<errc>(ec.value()));
  }

  detail::pool_ref ref() const noexcept { return {core_, stamp_}; }

  detail::core* core_;
  std::uint32_t stamp_;  // core_'s life (src/lifetime/)

  // A pool face over a core that a C pool owns (spool_pool; the default pool is one).
  friend struct ::spool_pool;
  struct borrowed_core {};
  pool(borrowed_core, detail::core* c) noexcept;
  bool owns_core_ = true;
};

// f with a name, for tracing: submit, post, submit_after, post_after/at/every, then (and
// then_try, then_error) and task_group::run accept it wherever they accept f, and the task
// reports `name` to config::on_task_start and on_task_finish. name must outlive the task (a
// string literal). Costs a pointer in the task; an unnamed task is unchanged.
template <class F>
detail::named_fn<std::decay_t<F>> named(const char* name, F&& f) {
  return {name, std::forward<F>(f)};
}

// The calling thread's position in its pool: 0..max_threads-1 on a worker, -1 elsewhere.
int this_worker_index() noexcept;

// The pool whose task the calling thread is running: inside a task (on a worker, or run by a
// thread outside the pool: an outside waiter's own task, caller_runs) that task's pool; null
// elsewhere, including in a continuation run inline on a thread outside any pool. Inside a
// task of a pool made through the C API (or of default_pool()), the C++ face of that pool.
pool* this_pool() noexcept;

// ---- Process-wide pool and placement helpers ----
// A pool for the whole process, created on first use (thread-safe) with default settings: a
// fixed pool of one worker per CPU this process may use, named "spool-def". At exit (an
// atexit handler registered at creation) it is shut down draining: queued tasks run, the
// threads are joined. The object itself is never freed, so code running after that (a static
// object's destructor whose object was constructed before the pool's first use) still gets a
// valid pool, one that refuses submissions with errc::shut_down; a static destructor that
// runs before the handler finds the pool working. exit() called from one of its tasks leaves
// its threads running while the process ends (a worker cannot join itself).
pool& default_pool();
// The CPUs this process may run on (sched_getaffinity), in increasing order: a ready
// config::affinity that pins one worker to each.
std::vector<unsigned> allowed_cpus();
// Whether libspool was built with hwloc, so that pinned workers steal from near victims first.
bool topology_aware() noexcept;

// Marks the calling task as about to block (I/O, a lock, a latch) for the object's lifetime.
// On a worker of an elastic pool, the pool starts a compensating thread at once (up to
// max_threads) if fewer than min_threads workers would be left running or work is waiting,
// so blocking tasks cannot starve the others. Anywhere else it does nothing. Not movable.
class blocking_region {
 public:
  blocking_region() noexcept;
  ~blocking_region();
  blocking_region(const blocking_region&) = delete;
  blocking_region& operator=(const blocking_region&) = delete;

 private:
  void* worker_;  // the worker it marked, or null
};

namespace detail {
// Opens a fresh isolation region on the calling worker and returns the one it was in (0 for
// none); off a worker it does nothing and returns 0. isolation_leave restores it.
region_id isolation_enter() noexcept;
void isolation_leave(region_id outer) noexcept;
}  // namespace detail

// Runs f() and returns what it returns (or lets its exception through), in an isolation
// region of its own. A worker that waits (future::get/wait, task_group::wait, a fork's join)
// runs other tasks meanwhile; inside the region, such a wait runs only tasks submitted within
// the region and their descendants, never unrelated tasks. That removes the help-while-wait
// deadlock: a task that waits, say, on a future and only afterwards counts down a latch that
// another task waits at can no longer end up running that other task under its own wait.
//
//  - A task submitted from a worker belongs to the region the worker is in: the region of the
//    task it runs, or the innermost isolate() open on it. Its descendants inherit that region.
//  - An isolate() nested in a region opens a new region: tasks submitted in the inner one are
//    not the outer one's (as oneTBB's this_task_arena::isolate); the outer region's waits
//    leave them to other workers.
//  - An isolated wait takes its region's tasks from the worker's own deque (passing over
//    others' tasks there) and from the shared queue (high and low priorities); it does not
//    steal from other workers. A region task another worker holds is run by that worker, or
//    by an idle one, as any task is.
//  - Only the isolated wait is restricted: the worker's main loop still takes any task, and
//    tasks of a region may be run by any worker.
//  - Off a pool worker (a thread outside the pool) f() just runs: such a thread's waits block
//    without running tasks anyway.
// isolate() itself costs two stores to the worker's slot and one relaxed atomic increment.
template <class F>
decltype(auto) isolate(F&& f) {
  struct region {
    detail::region_id outer = detail::isolation_enter();
    region() noexcept = default;
    region(const region&) = delete;
    region& operator=(const region&) = delete;
    ~region() { detail::isolation_leave(outer); }
  } scope;
  return std::invoke(std::forward<F>(f));
}

}  // namespace spool
