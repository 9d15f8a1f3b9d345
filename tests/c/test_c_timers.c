/* The C API's timers and cancellation (spool.h, "timers and cancellation") from a C11
 * program: one-shot and periodic timers, spool_timer_cancel, on_cancel on every stop,
 * refusals, drain and discard shutdowns, spool_submit_cancellable, and spool_group_submit2's
 * cancellation token. Returns 0 if every check passed. */
#define _POSIX_C_SOURCE 200809L

#include <spool/spool.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "hold.h"

/* ---- a tally of runs and on_cancel calls (mutex + condvar) ---- */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ran;
  int cancelled;
  int stop_at;            /* periodic: cancel the timer itself on this run (0: never) */
  spool_timer* self;      /* the handle, for stop_at */
  int self_cancel_result; /* what that spool_timer_cancel returned */
} tally_t;

static void tally_init(tally_t* t) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
}

static void tally_destroy(tally_t* t) {
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
}

static void count_run(void* arg) {
  tally_t* t = arg;
  pthread_mutex_lock(&t->mu);
  int n = ++t->ran;
  spool_timer* self = t->self;
  pthread_mutex_unlock(&t->mu);
  if (t->stop_at != 0 && n == t->stop_at) {
    int rc = spool_timer_cancel(self);
    pthread_mutex_lock(&t->mu);
    t->self_cancel_result = rc;
    pthread_mutex_unlock(&t->mu);
  }
  pthread_mutex_lock(&t->mu);
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static void count_cancel(void* arg) {
  tally_t* t = arg;
  pthread_mutex_lock(&t->mu);
  ++t->cancelled;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static void wait_ran(tally_t* t, int n) {
  pthread_mutex_lock(&t->mu);
  while (t->ran < n) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
}

static void wait_cancelled(tally_t* t, int n) {
  pthread_mutex_lock(&t->mu);
  while (t->cancelled < n) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
}

static spool_pool* make_pool(unsigned threads) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = threads;
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  return pool;
}

/* A pool of one thread that hold_task holds (hold_worker): what is submitted next is queued. */
static spool_pool* make_held_pool(hold_t* hold) {
  hold_init(hold);
  spool_pool* pool = make_pool(1);
  CHECK_EQ(hold_worker(pool, hold), SPOOL_OK);
  return pool;
}

static const uint64_t ms = 1000000u;
static const uint64_t hour = 3600u * 1000000000u;

static void test_one_shot(void) {
  spool_pool* pool = make_pool(2);
  tally_t t;
  tally_init(&t);
  spool_timer* h = NULL;
  CHECK_EQ(spool_post_after(pool, 2 * ms, count_run, &t, count_cancel, &h), SPOOL_OK);
  CHECK(h != NULL);
  wait_ran(&t, 1);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(spool_timer_cancel(h), 0); /* it ran: too late */
  CHECK_EQ(spool_timer_release(h), SPOOL_OK);
  /* Without a handle. */
  CHECK_EQ(spool_post_after(pool, 0, count_run, &t, count_cancel, NULL), SPOOL_OK);
  wait_ran(&t, 2);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(t.ran, 2);
  CHECK_EQ(t.cancelled, 0);
  tally_destroy(&t);
}

static void test_cancel_pending(void) {
  spool_pool* pool = make_pool(1);
  tally_t t;
  tally_init(&t);
  spool_timer* h = NULL;
  CHECK_EQ(spool_post_after(pool, hour, count_run, &t, count_cancel, &h), SPOOL_OK);
  CHECK_EQ(spool_timer_cancel(h), 1);
  CHECK_EQ(t.cancelled, 1); /* called by spool_timer_cancel itself */
  CHECK_EQ(spool_timer_cancel(h), 0);
  CHECK_EQ(spool_timer_release(h), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK); /* nothing pending: no hour-long drain */
  CHECK_EQ(t.ran, 0);
  CHECK_EQ(t.cancelled, 1);
  tally_destroy(&t);
}

static void test_periodic(void) {
  spool_pool* pool = make_pool(2);
  tally_t t;
  tally_init(&t);
  spool_timer* h = NULL;
  pthread_mutex_lock(&t.mu); /* the first run waits until self is set */
  t.stop_at = 3;
  CHECK_EQ(spool_post_every(pool, ms, count_run, &t, count_cancel, &h), SPOOL_OK);
  t.self = h;
  pthread_mutex_unlock(&t.mu);
  wait_cancelled(&t, 1); /* a periodic timer always ends with on_cancel */
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(t.ran, 3);
  CHECK_EQ(t.self_cancel_result, 1);
  CHECK_EQ(t.cancelled, 1);
  CHECK_EQ(spool_timer_release(h), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  tally_destroy(&t);
}

static void test_bad_arguments(void) {
  spool_pool* pool = make_pool(1);
  tally_t t;
  tally_init(&t);
  spool_timer* h = (spool_timer*)&t;
  CHECK_EQ(spool_post_every(pool, 0, count_run, &t, NULL, &h), SPOOL_EINVAL);
  CHECK(h == NULL);
  CHECK_EQ(spool_post_after(NULL, 0, count_run, &t, NULL, &h), SPOOL_EINVAL);
  CHECK_EQ(spool_post_after(pool, 0, NULL, &t, NULL, &h), SPOOL_EINVAL);
  CHECK_EQ(spool_post_after_priority(pool, 7, 0, 0, count_run, &t, NULL, &h), SPOOL_EINVAL);
  CHECK_EQ(spool_timer_cancel(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_timer_release(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_task_cancel(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_task_release(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_cancel_requested(NULL), SPOOL_EINVAL);
  spool_task* task = NULL;
  CHECK_EQ(spool_submit_cancellable(pool, SPOOL_PRIORITY_NORMAL, count_run, &t, NULL, NULL),
           SPOOL_EINVAL);
  CHECK_EQ(spool_submit_cancellable(pool, 9, count_run, &t, NULL, &task), SPOOL_EINVAL);
  CHECK_EQ(spool_shutdown(pool, SPOOL_SHUTDOWN_DRAIN, NULL), SPOOL_OK);
  CHECK_EQ(spool_post_after(pool, 0, count_run, &t, count_cancel, &h), SPOOL_ESHUTDOWN);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(t.ran, 0);
  CHECK_EQ(t.cancelled, 0); /* refused calls call neither fn nor on_cancel */
  tally_destroy(&t);
}

static void test_due_after_close(void) {
  spool_pool* pool = make_pool(1);
  tally_t t;
  tally_init(&t);
  CHECK_EQ(spool_close(pool), SPOOL_OK);
  CHECK_EQ(spool_post_after(pool, 0, count_run, &t, count_cancel, NULL), SPOOL_OK);
  wait_cancelled(&t, 1); /* refused when due: on_cancel, not silence */
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(t.ran, 0);
  tally_destroy(&t);
}

static void test_shutdown_modes(void) {
  tally_t one, every;
  tally_init(&one);
  tally_init(&every);
  /* Drain with a bound of a minute: the pending one-shot runs, the periodic one stops. */
  spool_config cfg;
  spool_config_init(&cfg);
  CHECK_EQ(cfg.drain_timers_within_ms, 0u);
  cfg.threads = 2;
  cfg.drain_timers_within_ms = 60000;
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  CHECK_EQ(spool_post_after(pool, 20 * ms, count_run, &one, count_cancel, NULL), SPOOL_OK);
  CHECK_EQ(spool_post_every(pool, hour, count_run, &every, count_cancel, NULL), SPOOL_OK);
  size_t dropped = 99;
  CHECK_EQ(spool_shutdown(pool, SPOOL_SHUTDOWN_DRAIN, &dropped), SPOOL_OK);
  CHECK_EQ(dropped, 1u);
  CHECK_EQ(one.ran, 1);
  CHECK_EQ(one.cancelled, 0);
  CHECK_EQ(every.ran, 0);
  CHECK_EQ(every.cancelled, 1);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  /* Discard: every pending timer is dropped. */
  pool = make_pool(2);
  spool_timer* h = NULL;
  CHECK_EQ(spool_post_after(pool, hour, count_run, &one, count_cancel, &h), SPOOL_OK);
  CHECK_EQ(spool_post_every(pool, hour, count_run, &every, count_cancel, NULL), SPOOL_OK);
  CHECK_EQ(spool_shutdown(pool, SPOOL_SHUTDOWN_DISCARD, &dropped), SPOOL_OK);
  CHECK_EQ(dropped, 2u); /* the count includes dropped timers */
  CHECK_EQ(one.ran, 1);
  CHECK_EQ(one.cancelled, 1);
  CHECK_EQ(every.cancelled, 2);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(spool_timer_cancel(h), 0); /* ended; the pool is gone */
  CHECK_EQ(spool_timer_release(h), SPOOL_OK);
  tally_destroy(&one);
  tally_destroy(&every);
}

/* A timer that is never due (UINT64_MAX) does not hold up spool_destroy: the default drain
 * runs only timers already due and drops the rest, calling their on_cancel. */
static void test_destroy_with_a_never_due_timer(void) {
  tally_t never;
  tally_init(&never);
  spool_pool* pool = make_pool(1);
  CHECK_EQ(spool_post_after(pool, UINT64_MAX, count_run, &never, count_cancel, NULL), SPOOL_OK);
  CHECK_EQ(spool_post_after(pool, hour, count_run, &never, count_cancel, NULL), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(never.ran, 0);
  CHECK_EQ(never.cancelled, 2);
  tally_destroy(&never);
}

/* A stop source: tasks queued when the stop is requested call on_cancel instead of fn; the
 * source may be destroyed while they are queued; a stopped source refuses new submissions. */
static void test_stoppable_submit(void) {
  hold_t hold;
  spool_pool* pool = make_held_pool(&hold);
  tally_t t;
  tally_init(&t);
  spool_stop_source* src = NULL;
  CHECK_EQ(spool_stop_source_create(&src), SPOOL_OK);
  CHECK_EQ(spool_stop_source_requested(src), 0);
  CHECK_EQ(spool_submit_stoppable(pool, SPOOL_PRIORITY_NORMAL, src, count_run, &t, count_cancel),
           SPOOL_OK);
  CHECK_EQ(spool_submit_stoppable(pool, SPOOL_PRIORITY_HIGH, src, count_run, &t, count_cancel),
           SPOOL_OK);
  CHECK_EQ(spool_stop_source_request(src), 1);
  CHECK_EQ(spool_stop_source_request(src), 0);
  CHECK_EQ(spool_stop_source_requested(src), 1);
  CHECK_EQ(spool_submit_stoppable(pool, SPOOL_PRIORITY_NORMAL, src, count_run, &t, count_cancel),
           SPOOL_ECANCELED);
  CHECK_EQ(spool_stop_source_destroy(src), SPOOL_OK); /* its tasks are still queued */
  hold_release(&hold);
  wait_cancelled(&t, 2);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(t.ran, 0);
  spool_stats s;
  CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  CHECK_EQ(s.cancelled, 2);
  CHECK_EQ(spool_submit_stoppable(NULL, SPOOL_PRIORITY_NORMAL, src, count_run, &t, NULL),
           SPOOL_EINVAL);
  CHECK_EQ(spool_submit_stoppable(pool, SPOOL_PRIORITY_NORMAL, NULL, count_run, &t, NULL),
           SPOOL_EINVAL);
  CHECK_EQ(spool_stop_source_create(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  tally_destroy(&t);
  hold_destroy(&hold);
}

static void test_cancellable_submit(void) {
  hold_t hold;
  spool_pool* pool = make_held_pool(&hold);
  tally_t t;
  tally_init(&t);
  spool_task *a = NULL, *b = NULL;
  CHECK_EQ(spool_submit_cancellable(pool, SPOOL_PRIORITY_NORMAL, count_run, &t, count_cancel, &a),
           SPOOL_OK);
  CHECK_EQ(spool_submit_cancellable(pool, SPOOL_PRIORITY_NORMAL, count_run, &t, count_cancel, &b),
           SPOOL_OK);
  CHECK_EQ(spool_task_cancel(a), 1);
  CHECK_EQ(t.cancelled, 1); /* called by spool_task_cancel */
  CHECK_EQ(spool_task_cancel(a), 0);
  hold_release(&hold);
  wait_ran(&t, 1);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(spool_task_cancel(b), 0); /* it ran */
  spool_stats s;
  CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  CHECK_EQ(s.cancelled, 1);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(spool_task_release(a), SPOOL_OK); /* after the pool is gone */
  CHECK_EQ(spool_task_release(b), SPOOL_OK);
  CHECK_EQ(t.ran, 1);
  CHECK_EQ(t.cancelled, 1);
  tally_destroy(&t);
  hold_destroy(&hold);
}

/* ---- spool_group_submit2 ---- */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  int saw_cancelled;
  hold_t* gate; /* if set: announce, wait, then read the token again */
  int cancelled_after_gate;
} token_probe;

static void probe_task(void* arg, const spool_cancel_token* token) {
  token_probe* p = arg;
  int first = spool_cancel_requested(token);
  int later = first;
  if (p->gate != NULL && !first) {
    hold_task(p->gate);
    later = spool_cancel_requested(token);
  }
  pthread_mutex_lock(&p->mu);
  ++p->calls;
  p->saw_cancelled += first;
  p->cancelled_after_gate += later;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static void test_group_token(void) {
  spool_pool* pool = make_pool(1);
  spool_group* g = NULL;
  CHECK_EQ(spool_group_create(pool, NULL, &g), SPOOL_OK);
  hold_t gate;
  hold_init(&gate);
  token_probe running = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, &gate, 0};
  token_probe queued = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL, 0};
  /* The first task holds the only worker and reads its token before and after the cancel;
   * the second is still queued when the group is cancelled. */
  CHECK_EQ(spool_group_submit2(g, SPOOL_PRIORITY_NORMAL, probe_task, &running), SPOOL_OK);
  hold_wait_started(&gate, 1);
  CHECK_EQ(spool_group_submit2(g, SPOOL_PRIORITY_NORMAL, probe_task, &queued), SPOOL_OK);
  CHECK_EQ(spool_group_cancel(g), SPOOL_OK);
  hold_release(&gate);
  CHECK_EQ(spool_group_wait(g, -1), SPOOL_ECANCELED);
  CHECK_EQ(running.calls, 1);
  CHECK_EQ(running.saw_cancelled, 0);        /* it started before the cancel */
  CHECK_EQ(running.cancelled_after_gate, 1); /* and saw it through its token */
  CHECK_EQ(queued.calls, 1);                 /* skipped, but still called once */
  CHECK_EQ(queued.saw_cancelled, 1);
  CHECK_EQ(spool_group_submit2(g, SPOOL_PRIORITY_NORMAL, NULL, &queued), SPOOL_EINVAL);
  CHECK_EQ(spool_group_submit2(NULL, SPOOL_PRIORITY_NORMAL, probe_task, &queued), SPOOL_EINVAL);
  CHECK_EQ(spool_group_submit2(g, 5, probe_task, &queued), SPOOL_EINVAL);
  CHECK_EQ(spool_group_destroy(g), SPOOL_OK);

  /* A task the pool drops (discarding shutdown) is called once with a cancelled token. */
  hold_t hold;
  hold_init(&hold);
  CHECK_EQ(spool_group_create(pool, NULL, &g), SPOOL_OK);
  CHECK_EQ(hold_worker(pool, &hold), SPOOL_OK);
  token_probe dropped = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL, 0};
  CHECK_EQ(spool_group_submit2(g, SPOOL_PRIORITY_NORMAL, probe_task, &dropped), SPOOL_OK);
  pthread_t stopper;
  shutdown_arg stop = {pool, 0, -1};
  CHECK_EQ(pthread_create(&stopper, NULL, shutdown_discard_thread, &stop), 0);
  pthread_mutex_lock(&dropped.mu); /* the discard sweep calls it, while the worker is held */
  while (dropped.calls == 0) pthread_cond_wait(&dropped.cv, &dropped.mu);
  pthread_mutex_unlock(&dropped.mu);
  hold_release(&hold);
  pthread_join(stopper, NULL);
  CHECK_EQ(stop.rc, SPOOL_OK);
  CHECK_EQ(stop.dropped, 1);
  CHECK_EQ(dropped.calls, 1);
  CHECK_EQ(dropped.saw_cancelled, 1);
  CHECK_EQ(spool_group_destroy(g), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  hold_destroy(&hold);
  hold_destroy(&gate);
}

int main(void) {
  check_watchdog(120);
  test_one_shot();
  test_cancel_pending();
  test_periodic();
  test_bad_arguments();
  test_due_after_close();
  test_shutdown_modes();
  test_destroy_with_a_never_due_timer();
  test_cancellable_submit();
  test_stoppable_submit();
  test_group_token();
  return check_report("test_c_timers");
}
