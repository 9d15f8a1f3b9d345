/* spool/spool.h: the C API of libspool, a producer-consumer thread pool.
 *
 *   spool_config cfg;
 *   spool_config_init(&cfg);
 *   cfg.threads = 4;
 *   cfg.queue_capacity = 1024;
 *   spool_pool *pool;
 *   if (spool_create(&cfg, &pool) != SPOOL_OK) ...;
 *   int rc = spool_submit(pool, work, arg);    // SPOOL_OK or SPOOL_E*; see spool_strerror
 *   spool_wait_idle(pool);
 *   spool_destroy(pool);                       // drains, joins, frees
 *
 * Every function returns SPOOL_OK (0) or one of the SPOOL_E* codes below. A refused submission
 * never calls fn and leaves arg with the caller. A task that is accepted and later dropped
 * without running (SPOOL_SHUTDOWN_DISCARD, SPOOL_FULL_DISCARD_OLDEST) has its on_cancel hook
 * called with its arg, if it was submitted with spool_submit_ex, so the caller can free it.
 */
#ifndef SPOOL_SPOOL_H
#define SPOOL_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  SPOOL_OK = 0,
  SPOOL_EFULL = 1,     /* queue full and the policy is SPOOL_FULL_REJECT */
  SPOOL_ETIMEDOUT = 2, /* queue stayed full for block_timeout_ms */
  SPOOL_ESHUTDOWN = 3, /* the pool is closed or shut down */
  SPOOL_EINVAL = 4,    /* a null pointer or a bad config value */
  SPOOL_EDEADLK = 5,   /* a blocking call made from one of the pool's own workers */
  SPOOL_ECANCELED = 6, /* the task was dropped before it ran */
  SPOOL_ENOMEM = 7,    /* out of memory */
  SPOOL_ESYSTEM = 8    /* the OS refused a resource (thread creation) */
};

typedef enum spool_full_policy {
  SPOOL_FULL_BLOCK = 0,     /* wait for room (default) */
  SPOOL_FULL_BLOCK_TIMEOUT, /* wait up to block_timeout_ms, then SPOOL_ETIMEDOUT */
  SPOOL_FULL_REJECT,        /* SPOOL_EFULL at once */
  SPOOL_FULL_CALLER_RUNS,   /* run the task in the submitting thread */
  SPOOL_FULL_DISCARD_OLDEST /* drop the oldest queued task, enqueue this one */
} spool_full_policy;

typedef enum spool_shutdown_mode {
  SPOOL_SHUTDOWN_DRAIN = 0, /* run everything queued, then join */
  SPOOL_SHUTDOWN_DISCARD    /* drop everything queued, then join */
} spool_shutdown_mode;

typedef enum spool_priority {
  SPOOL_PRIORITY_LOW = 0,
  SPOOL_PRIORITY_NORMAL = 1, /* what spool_submit uses */
  SPOOL_PRIORITY_HIGH = 2
} spool_priority;

typedef enum spool_scale_kind { SPOOL_SCALE_STARTED = 0, SPOOL_SCALE_RETIRED } spool_scale_kind;
typedef enum spool_scale_cause {
  SPOOL_SCALE_INITIAL = 0, /* started with the pool */
  SPOOL_SCALE_LOAD,        /* work waiting, no worker making progress */
  SPOOL_SCALE_BLOCKING,    /* a worker entered a blocking region */
  SPOOL_SCALE_IDLE,        /* idle for keep_alive above min_threads */
  SPOOL_SCALE_SHUTDOWN,    /* the pool shut down */
  SPOOL_SCALE_RESIZE       /* spool_resize raised min_threads or lowered max_threads */
} spool_scale_cause;

typedef struct spool_scale_event {
  spool_scale_kind what;
  spool_scale_cause why;
  unsigned worker_index;
  unsigned threads_live; /* after the change */
} spool_scale_event;

/* A task as the tracing hooks see it (spool::task_info). */
typedef struct spool_task_info {
  const char* name; /* given with spool_submit_named (or spool::named), or NULL */
  int worker_index; /* spool_worker_index() of the thread running it; -1 outside the pool */
} spool_task_info;

typedef enum spool_task_end {
  SPOOL_TASK_COMPLETED = 0, /* returned */
  SPOOL_TASK_FAILED,        /* threw (a C++ task) */
  SPOOL_TASK_CANCELLED      /* did not run its work: cancelled or stopped before it started */
} spool_task_end;

typedef struct spool_config {
  unsigned threads;      /* worker threads of a fixed pool; 0 = number of CPUs */
  size_t queue_capacity; /* bound on tasks queued from outside the pool and not yet taken by
                            a worker (spool/config.hpp says what a worker's run leaves out);
                            0 = unbounded */
  spool_full_policy on_full;
  unsigned block_timeout_ms; /* for SPOOL_FULL_BLOCK_TIMEOUT */
  const char* name;          /* thread name prefix; NULL = "spool" */
  unsigned spin_rounds;      /* idle polling before sleeping */
  /* Elastic sizing (see spool::config): 0 = threads. Requires 1 <= min <= max. */
  unsigned min_threads;
  unsigned max_threads;
  unsigned keep_alive_ms;           /* idle time before a thread above min retires */
  unsigned monitor_min_interval_us; /* starvation checks while busy: from this... */
  unsigned monitor_max_interval_us; /* ...backing off to this */
  unsigned aging_ms;                /* priority aging; 0 = strict priorities */
  unsigned defer_period_us;         /* deferred wake-ups (spool::config); 0 = off */
  /* Told of every thread start and retirement (may be NULL). */
  void (*on_scale)(const spool_scale_event* event, void* arg);
  void* on_scale_arg;
  /* ---- worker hooks, placement, run-time bounds (see spool::config) ---- */
  /* Called on each worker thread itself, with its index: on_worker_start before its first
   * task, on_worker_stop after its last (retirement or shutdown); once each per thread. Either
   * may be NULL. They must not resize, pause, resume, wait on, shut down or destroy the pool. */
  void (*on_worker_start)(unsigned worker_index, void* arg);
  void (*on_worker_stop)(unsigned worker_index, void* arg);
  void* worker_hook_arg;
  /* CPU ids; worker i is pinned to affinity[i % affinity_count] (copied at spool_create).
   * NULL and 0: not pinned. An id this process may not use: SPOOL_EINVAL. */
  const unsigned* affinity;
  size_t affinity_count;
  unsigned thread_capacity; /* the most threads spool_resize may allow; 0 = max_threads */
  /* Timers at shutdown (spool::config::drain_timers_within): a drain (spool_shutdown DRAIN,
   * spool_destroy) runs the one-shot timers due within this many milliseconds and drops the
   * rest (their on_cancel is called; they count in spool_shutdown's dropped). 0 (default):
   * only timers already due run, and a drain never waits for a timer. */
  unsigned drain_timers_within_ms;
  /* Task hooks, for tracing (spool::config::on_task_start/on_task_finish): called on the thread
   * that runs each task, just before and just after it. NULL costs nothing. They must not block
   * or call into the pool's lifecycle. */
  void (*on_task_start)(const spool_task_info* task, void* arg);
  void (*on_task_finish)(const spool_task_info* task, spool_task_end end, void* arg);
  void* task_hook_arg;
} spool_config;

typedef struct spool_stats {
  uint64_t threads_live;
  uint64_t threads_busy;
  uint64_t queued;
  uint64_t submitted;
  uint64_t completed;
  uint64_t failed;
  uint64_t rejected;
  uint64_t stolen;
  uint64_t cancelled;
  uint64_t threads_blocked;
  uint64_t threads_started;
  uint64_t threads_retired;
  uint64_t grown_for_load;
  uint64_t grown_for_blocking;
} spool_stats;

typedef struct spool_pool spool_pool;

/* Fills cfg with the defaults. */
void spool_config_init(spool_config* cfg);

/* Creates a pool (cfg NULL: defaults). On failure *out is NULL. */
int spool_create(const spool_config* cfg, spool_pool** out);

/* Queues fn(arg). From a worker of this pool it never blocks and ignores the bound. */
int spool_submit(spool_pool* pool, void (*fn)(void*), void* arg);

/* As spool_submit; if the task is accepted but dropped without running, on_cancel(arg) is
 * called (from the thread that drops it) instead of fn. on_cancel may be NULL. */
int spool_submit_ex(spool_pool* pool, void (*fn)(void*), void* arg, void (*on_cancel)(void*));

/* Queues fn(args[0]) ... fn(args[n-1]) as n tasks (a bulk submission). From outside an
 * unbounded pool, or from a worker, the batch goes in whole: args is copied, and the workers
 * share the batch, taking its indices in chunks, so a task costs a call of fn; its tasks start
 * in index order on each worker. Elsewhere (a bounded pool) each task meets the bound on its
 * own. Stops at the first refusal and returns its code; *accepted (may be NULL) receives how
 * many were queued, a prefix of args (all or none for a batch that goes in whole). */
int spool_submit_bulk(spool_pool* pool, void (*fn)(void*), void* const* args, size_t n,
                      size_t* accepted);

/* As spool_submit_ex, at a priority (spool_priority). */
int spool_submit_priority(spool_pool* pool, int priority, void (*fn)(void*), void* arg,
                          void (*on_cancel)(void*));

/* As spool_submit_priority, with a name the task hooks report (cfg.on_task_start/finish).
 * name must outlive the task (a string literal); NULL is no name. */
int spool_submit_named(spool_pool* pool, int priority, const char* name, void (*fn)(void*),
                       void* arg, void (*on_cancel)(void*));

/* Bracket a stretch of the calling task that blocks (I/O, locks): an elastic pool starts a
 * compensating thread at once (see spool::blocking_region). Do nothing off a pool worker.
 * Calls nest; each begin needs its end on the same thread. */
void spool_blocking_begin(void);
void spool_blocking_end(void);

/* Calls fn(arg) in an isolation region of its own (spool::isolate): on a worker of pool, a
 * wait inside fn (spool_group_wait, spool_group_destroy) runs only tasks submitted within the
 * region and their descendants, never unrelated tasks, so a task that waits and afterwards
 * releases another task cannot end up running that task under its own wait. Elsewhere fn just
 * runs. Returns SPOOL_OK once fn has returned; SPOOL_EINVAL (fn not called) if pool or fn is
 * NULL. */
int spool_isolate(spool_pool* pool, void (*fn)(void*), void* arg);

/* Blocks until nothing is queued or running. SPOOL_EDEADLK from a worker of this pool. */
int spool_wait_idle(spool_pool* pool);

/* Stops accepting submissions from outside the pool; returns at once. SPOOL_EINVAL for the
 * default pool, as spool_shutdown and spool_destroy: that pool ends only at exit. */
int spool_close(spool_pool* pool);

/* Refuses new work, runs or drops what is queued, joins the threads. The pool must still be
 * destroyed. dropped (may be NULL) receives how many tasks were dropped, pending timers
 * included (a drain drops the timers not due within cfg.drain_timers_within_ms). */
int spool_shutdown(spool_pool* pool, spool_shutdown_mode mode, size_t* dropped);

/* What spool_shutdown_timed did (spool::shutdown_report). */
typedef struct spool_shutdown_report {
  size_t dropped;        /* tasks dropped unrun: queued when the deadline passed, and timers */
  size_t timers_dropped; /* of those, timers not due by the deadline, and periodic ones */
  int timed_out;         /* 1: the deadline passed with tasks still queued or running */
} spool_shutdown_report;

/* A drain with a deadline timeout_ms (>= 0) from now: timers due by then run, the rest are
 * dropped; queued tasks run until the deadline and what is still queued then is dropped (its
 * on_cancel called); running tasks finish. Joins. report may be NULL. SPOOL_EINVAL for a
 * negative timeout or the default pool; SPOOL_EDEADLK from a worker of this pool. */
int spool_shutdown_timed(spool_pool* pool, long timeout_ms, spool_shutdown_report* report);

/* Drains, joins and frees. From a worker of this pool: SPOOL_EDEADLK, and nothing is freed. */
int spool_destroy(spool_pool* pool);

int spool_get_stats(const spool_pool* pool, spool_stats* out);

/* The calling thread's worker index in its pool, or -1 if it is not a pool worker. */
int spool_worker_index(void);

/* The pool whose task the calling thread runs (see spool::this_pool), or NULL elsewhere and
 * inside a task of a pool made through the C++ API. */
spool_pool* spool_this_pool(void);

/* A static English description of a SPOOL_E* code. */
const char* spool_strerror(int code);

/* ---- run-time control and the process-wide pool (see spool::pool in spool/pool.hpp) ---- */

/* Changes the elastic bounds: threads start at once up to min_threads; threads above
 * max_threads retire as each finds no work (a running task is never interrupted). SPOOL_EINVAL
 * unless 1 <= min_threads <= max_threads <= thread_capacity (bounds unchanged),
 * SPOOL_ESHUTDOWN after shutdown, SPOOL_ESYSTEM if a thread could not start. */
int spool_resize(spool_pool* pool, unsigned min_threads, unsigned max_threads);

/* Pause: until spool_resume, no task starts; running ones finish; submissions are still
 * accepted and queued. Shutdown and spool_destroy resume a paused pool first (drain runs the
 * queued tasks, discard drops them). SPOOL_ESHUTDOWN once shutdown has begun. */
int spool_pause(spool_pool* pool);
int spool_resume(spool_pool* pool);
/* 1 if paused, 0 if not, SPOOL_EINVAL for NULL. */
int spool_is_paused(const spool_pool* pool);

/* As spool_wait_idle for at most timeout_ms (< 0: forever): SPOOL_OK if the pool became
 * idle, SPOOL_ETIMEDOUT if tasks were still queued or running (always, while paused with work
 * queued), SPOOL_EDEADLK from a worker of this pool. */
int spool_wait_idle_for(spool_pool* pool, long timeout_ms);

/* The process-wide pool (spool::default_pool(), the same pool), created on first use with
 * one worker per CPU; NULL if it could not be created. It is shut down, draining, at exit,
 * and never freed: spool_close, spool_shutdown and spool_destroy refuse it (SPOOL_EINVAL). */
spool_pool* spool_default_pool(void);

/* The CPUs this process may use, ascending: writes up to cap ids to cpus and returns how many
 * there are (which may exceed cap). For spool_config.affinity. */
size_t spool_allowed_cpus(unsigned* cpus, size_t cap);

/* ---- task groups ---- */

/* A set of tasks on one pool that can be waited for and cancelled together (spool::task_group
 * in C++; see spool/task_group.hpp for the full semantics). A nested group's tasks count in
 * its parent too: waiting on the parent waits for them, and cancelling the parent cancels the
 * nested group. A group must be destroyed before its pool. Waiting on or destroying a group
 * from one of its own tasks waits for itself and never returns. */
typedef struct spool_group spool_group;

/* Creates a group on pool, nested in parent if parent is not NULL (parent must be on the same
 * pool, else SPOOL_EINVAL). On failure *out is NULL. */
int spool_group_create(spool_pool* pool, spool_group* parent, spool_group** out);

/* Queues fn(arg) as a task of the group, like spool_submit_ex (same errors; a refused task
 * leaves the group's counts unchanged and arg with the caller). If the group is cancelled
 * before the task starts, or the pool drops it, on_cancel(arg) is called instead of fn (from
 * the thread that skips or drops it; on_cancel may be NULL). From a worker of the pool it
 * never blocks. */
int spool_group_submit(spool_group* group, void (*fn)(void*), void* arg, void (*on_cancel)(void*));

/* As spool_group_submit, at a priority (spool_priority); SPOOL_EINVAL for another value. */
int spool_group_submit_priority(spool_group* group, int priority, void (*fn)(void*), void* arg,
                                void (*on_cancel)(void*));

/* Waits until no task of the group (or of a group nested in it) is pending; timeout_ms < 0
 * waits forever. On a worker of the group's pool it runs other tasks meanwhile. Returns
 * SPOOL_OK, SPOOL_ECANCELED if the group is cancelled (spool_group_cancel on it or an ancestor,
 * or the pool dropped one of its tasks), or SPOOL_ETIMEDOUT if tasks are still pending. */
int spool_group_wait(spool_group* group, long timeout_ms);

/* Tasks of the group (and of groups nested in it) that have not started are skipped, their
 * on_cancel hooks called; tasks submitted later are skipped too. Returns at once. */
int spool_group_cancel(spool_group* group);

/* 1 if the group is cancelled (see spool_group_wait), 0 if not, SPOOL_EINVAL for NULL. */
int spool_group_is_cancelled(const spool_group* group);

/* Sets the callback told of each drain: cb(status, arg), with status SPOOL_OK or
 * SPOOL_ECANCELED, each time the group's pending count drops to zero after a task finished,
 * from the thread that finished the last one. It returns before spool_group_wait for that
 * drain returns; calls never overlap. cb NULL removes the callback. cb must not wait on,
 * destroy or set the callback of its own group. */
int spool_group_on_finished(spool_group* group, void (*cb)(int status, void* arg), void* arg);

/* Waits for the group's pending tasks as spool_group_wait does, then frees the group. A nested
 * group may outlive its parent. */
int spool_group_destroy(spool_group* group);

/* Queues fn(arg, token) as a task of the group, at a priority (spool_priority). fn is called
 * exactly once unless the submission is refused (then never, and arg stays with the caller):
 * spool_cancel_requested(token) tells it, at any moment of the call, whether the group (or an
 * ancestor) has been cancelled, so a long task can stop early without holding the group. If
 * the group was cancelled before the task started, or the pool drops the task (a discarding
 * shutdown), fn is still called, from the thread that skips or drops it, with a token that
 * already reads 1: the call then only releases arg. The token is valid during the call only.
 * Same errors as spool_group_submit_priority. */
typedef struct spool_cancel_token spool_cancel_token;
int spool_group_submit2(spool_group* group, int priority,
                        void (*fn)(void* arg, const spool_cancel_token* token), void* arg);

/* 1 if the task that was given token should stop (its group is cancelled, or the task was
 * skipped or dropped), 0 if not, SPOOL_EINVAL for NULL. */
int spool_cancel_requested(const spool_cancel_token* token);

/* ---- timers and cancellation ---- */

/* Delayed and periodic tasks (spool::pool::post_after and post_every; the semantics are in
 * src/timers/README.md). The timer waits in the pool's timer queue (one thread, started by
 * the first timer) and, when due, fn(arg) is queued like spool_submit, at normal priority,
 * never waiting for room in a bounded queue. on_cancel (may be NULL) is called once with arg
 * when the timer stops without running to its end: a one-shot timer cancelled or dropped
 * before fn ran, or due after spool_close (refused); a periodic timer whenever it stops (it
 * has no other end). It is called from the thread that stops the timer (spool_timer_cancel's
 * caller, a worker, the timer thread, or the shutting-down thread). Shutdown: DRAIN runs the
 * pending one-shot timers due within cfg.drain_timers_within_ms (0: those already due) and
 * drops the rest and every periodic one; DISCARD drops every pending timer; dropped timers
 * count in spool_shutdown's dropped. A refused call (SPOOL_ESHUTDOWN once shutdown has begun,
 * SPOOL_EINVAL, SPOOL_ENOMEM, SPOOL_ESYSTEM if the timer thread cannot start) never calls fn or
 * on_cancel. handle (may be NULL) receives a handle for spool_timer_cancel, which the caller must
 * give back with spool_timer_release; releasing it does not cancel the timer. */
typedef struct spool_timer spool_timer;

/* fn(arg) once, delay_ns nanoseconds from now (a delay past the clock's range: never). */
int spool_post_after(spool_pool* pool, uint64_t delay_ns, void (*fn)(void*), void* arg,
                     void (*on_cancel)(void*), spool_timer** handle);

/* fn(arg) every period_ns (> 0, else SPOOL_EINVAL), the first time one period from now; runs
 * never overlap, and periods missed by a late or long run are skipped. */
int spool_post_every(spool_pool* pool, uint64_t period_ns, void (*fn)(void*), void* arg,
                     void (*on_cancel)(void*), spool_timer** handle);

/* Either of the above at a priority: period_ns 0 is one-shot after delay_ns, otherwise the
 * first run is delay_ns from now and the next ones every period_ns. */
int spool_post_after_priority(spool_pool* pool, int priority, uint64_t delay_ns, uint64_t period_ns,
                              void (*fn)(void*), void* arg, void (*on_cancel)(void*),
                              spool_timer** handle);

/* Stops the timer: 1 if that prevented a run that would otherwise have started (a one-shot
 * timer not yet started; a periodic timer still live, whose run in progress, if any, then
 * finishes), 0 if the timer had already ended, SPOOL_EINVAL for NULL. */
int spool_timer_cancel(spool_timer* timer);

/* Gives the handle back (the timer goes on). Valid after the pool is destroyed. */
int spool_timer_release(spool_timer* timer);

/* A submission that can be cancelled: as spool_submit_priority, and *handle (required)
 * receives a handle on the task (NULL if refused). spool_task_cancel returns 1 if the task had
 * not started and now never will (on_cancel(arg), if set, has then been called by that very
 * call; the task is counted in stats.cancelled when a worker meets it in the queue), 0 if
 * it has started, finished, or was already cancelled or dropped; SPOOL_EINVAL for NULL. A
 * worker starting the task and spool_task_cancel race for one claim: exactly one wins. The
 * handle must be given back with spool_task_release, which may come before or after the
 * task runs, and after the pool is destroyed. */
typedef struct spool_task spool_task;
int spool_submit_cancellable(spool_pool* pool, int priority, void (*fn)(void*), void* arg,
                             void (*on_cancel)(void*), spool_task** handle);
int spool_task_cancel(spool_task* task);
int spool_task_release(spool_task* task);

/* Stop sources (std::stop_source in C++): one request stops every task submitted with the
 * source that has not started. spool_stop_source_request returns 1 if this call made the
 * request, 0 if it had been made; spool_stop_source_requested returns 1 or 0 (SPOOL_EINVAL
 * for NULL). A source may be destroyed while tasks submitted with it are still queued. */
typedef struct spool_stop_source spool_stop_source;
int spool_stop_source_create(spool_stop_source** out);
int spool_stop_source_request(spool_stop_source* source);
int spool_stop_source_requested(const spool_stop_source* source);
int spool_stop_source_destroy(spool_stop_source* source);

/* As spool_submit_priority, with a stop source: if a stop is requested before a worker starts
 * the task, fn is not called and on_cancel(arg) is (when a worker reaches the task, or the pool
 * drops it); the task counts in stats.cancelled. SPOOL_ECANCELED, with nothing called and arg
 * left with the caller, if the stop was requested before this call; SPOOL_EINVAL for a NULL
 * pool, fn or source. A task that has started is not interrupted: it may look at the source
 * itself (spool_stop_source_requested) while the caller keeps the source alive. */
int spool_submit_stoppable(spool_pool* pool, int priority, spool_stop_source* source,
                           void (*fn)(void*), void* arg, void (*on_cancel)(void*));

#ifdef __cplusplus
}
#endif

#endif /* SPOOL_SPOOL_H */
