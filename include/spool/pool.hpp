// spool/pool.hpp: spool::pool, a producer-consumer thread pool.
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

#include "spool/config.hpp"
#include "spool/detail/callable.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/detail/stop.hpp"
#include "spool/detail/work_item.hpp"
#include "spool/error.hpp"
#include "spool/future.hpp"
#include "spool/priority.hpp"
#include "spool/shutdown.hpp"
#include "spool/stats.hpp"
#include "spool/timer.hpp"

struct spool_pool;  // a pool of the C API (spool/spool.h), which keeps a C++ face

namespace spool {

namespace detail {
struct pool_access;  // library-internal access to a pool's core
}

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
    detail::work_item* t;
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
    detail::work_item* t;
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
    auto make = [](void* at, std::size_t) noexcept -> detail::work_item* {
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
    auto make = [](void* fn, std::size_t i) noexcept -> detail::work_item* {
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
  // A timer waits in the pool's timer queue (served by one thread, "<name>-tmr", started by the
  // first timer, and by an idle worker that parks until the earliest deadline) until its
  // deadline, then its task is submitted at priority p like an outside submission, except that
  // it never waits for room: a due timer enters a full bounded queue past its bound. Once the
  // pool is closed, a due timer is refused: post_after's and post_every's callables then report
  // spool::error(errc::shut_down) to config::on_exception (called on the thread that fired the
  // timer: the timer thread or a worker), submit_after's future reports it. Shutdown: drain
  // runs the pending one-shot timers due within config::drain_timers_within and drops the rest
  // and the periodic ones; discard drops every pending timer (a dropped timer's future reports
  // task_cancelled). wait_idle() does not wait for timers that are not yet due. A pending
  // timer is not counted in stats until it is due. Throws spool::error (errc::shut_down once
  // shutdown has begun, errc::system if the timer thread cannot start, errc::invalid_argument
  // for a period <= 0).

  // Runs f() once, `delay` from now (a delay <= 0: as soon as the timer queue serves it).
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
  std::error_code enqueue(detail::work_item* t, priority p = priority::normal) noexcept;
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
  bulk_result enqueue_bulk(std::size_t n, detail::work_item* (*make)(void*, std::size_t),
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

// The calling thread's position in its pool: 0..max_threads-1 on a worker, -1 elsewhere.
int this_worker_index() noexcept;

// The pool whose task the calling thread is running: inside a task (on a worker, or run by a
// thread outside the pool: an outside waiter's own task, caller_runs) that task's pool; null
// elsewhere, including in a continuation run inline on a thread outside any pool. Inside a
// task of a pool made through the C API (or of default_pool()), the C++ face of that pool.
pool* this_pool() noexcept;

}  // namespace spool
