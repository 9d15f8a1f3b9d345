/* Task groups through the C API (spool.h): create, submit, wait (with and without a timeout),
 * cancel with on_cancel hooks, is_cancelled, on_finished, nesting, destroy, groups used from
 * inside a task, shutdown(DISCARD) with group tasks queued, and SPOOL_EINVAL for every NULL.
 * Tasks that must stay pending are held on a mutex + condvar; no sleeps.
 * Returns 0 if every check passed; otherwise prints each failed check and returns 1. */
#define _POSIX_C_SOURCE 200809L

#include <spool/spool.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "hold.h"

/* ---- helpers: holding tasks, counting runs, cancellations and drains ---- */

typedef struct {
  pthread_mutex_t mu;
  int ran;
  int cancelled;
  int drains;
  int last_status;
} tally_t;

static void tally_init(tally_t* t) {
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mu, NULL);
  t->last_status = -1;
}

static void tally_destroy(tally_t* t) { pthread_mutex_destroy(&t->mu); }

static int tally_get(tally_t* t, const int* field) {
  pthread_mutex_lock(&t->mu);
  int n = *field;
  pthread_mutex_unlock(&t->mu);
  return n;
}

static void count_run(void* arg) {
  tally_t* t = arg;
  pthread_mutex_lock(&t->mu);
  ++t->ran;
  pthread_mutex_unlock(&t->mu);
}

static void count_cancel(void* arg) {
  tally_t* t = arg;
  pthread_mutex_lock(&t->mu);
  ++t->cancelled;
  pthread_mutex_unlock(&t->mu);
}

static void count_drain(int status, void* arg) {
  tally_t* t = arg;
  pthread_mutex_lock(&t->mu);
  ++t->drains;
  t->last_status = status;
  pthread_mutex_unlock(&t->mu);
}

static spool_pool* make_pool(unsigned threads) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = threads;
  spool_pool* pool = NULL;
  int rc = spool_create(&cfg, &pool);
  CHECK_EQ(rc, SPOOL_OK);
  if (rc != SPOOL_OK || pool == NULL) {
    fprintf(stderr, "spool_create failed: %s\n", spool_strerror(rc));
    _exit(1);
  }
  return pool;
}

/* ---- the tests ---- */

static void noop(void* arg) { (void)arg; }
static void on_drain_noop(int status, void* arg) {
  (void)status;
  (void)arg;
}

/* Every function answers NULL with SPOOL_EINVAL; a parent on another pool is refused too. */
static void test_invalid_arguments(void) {
  spool_pool* pool = make_pool(1);
  spool_pool* other = make_pool(1);
  spool_group *g = NULL, *out = (spool_group*)&out;
  CHECK_EQ(spool_group_create(NULL, NULL, &out), SPOOL_EINVAL);
  CHECK(out == NULL);
  CHECK_EQ(spool_group_create(pool, NULL, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_create(pool, NULL, &g), SPOOL_OK);
  CHECK_EQ(spool_group_create(other, g, &out), SPOOL_EINVAL);
  CHECK(out == NULL);
  CHECK_EQ(spool_group_submit(NULL, noop, NULL, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_submit(g, NULL, NULL, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_submit_priority(NULL, SPOOL_PRIORITY_HIGH, noop, NULL, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_submit_priority(g, 3, noop, NULL, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_submit_priority(g, -1, noop, NULL, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_wait(NULL, -1), SPOOL_EINVAL);
  CHECK_EQ(spool_group_wait(NULL, 0), SPOOL_EINVAL);
  CHECK_EQ(spool_group_cancel(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_is_cancelled(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_on_finished(NULL, on_drain_noop, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_destroy(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_group_destroy(g), SPOOL_OK);
  CHECK_EQ(spool_destroy(other), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
}

/* Submit, wait forever, wait with a timeout on an idle group; one drain reported per batch
 * (the batch's first task is held until the batch is in, so the count cannot reach zero early);
 * a NULL callback removes it. */
static void test_submit_wait_and_on_finished(void) {
  spool_pool* pool = make_pool(2);
  tally_t t;
  tally_init(&t);
  spool_group* g = NULL;
  CHECK_EQ(spool_group_create(pool, NULL, &g), SPOOL_OK);
  CHECK_EQ(spool_group_wait(g, 0), SPOOL_OK); /* nothing pending */
  CHECK_EQ(spool_group_on_finished(g, count_drain, &t), SPOOL_OK);
  for (int batch = 1; batch <= 2; ++batch) {
    hold_t h;
    hold_init(&h);
    CHECK_EQ(spool_group_submit(g, hold_task, &h, NULL), SPOOL_OK);
    for (int i = 0; i < 50; ++i) CHECK_EQ(spool_group_submit(g, count_run, &t, NULL), SPOOL_OK);
    hold_release(&h);
    CHECK_EQ(spool_group_wait(g, batch == 1 ? -1 : 60000), SPOOL_OK);
    CHECK_EQ(tally_get(&t, &t.ran), 50 * batch);
    CHECK_EQ(tally_get(&t, &t.drains), batch);
    CHECK_EQ(tally_get(&t, &t.last_status), SPOOL_OK);
    hold_destroy(&h);
  }
  CHECK_EQ(spool_group_is_cancelled(g), 0);
  CHECK_EQ(spool_group_on_finished(g, NULL, NULL), SPOOL_OK);
  CHECK_EQ(spool_group_submit(g, count_run, &t, NULL), SPOOL_OK);
  CHECK_EQ(spool_group_wait(g, -1), SPOOL_OK);
  CHECK_EQ(tally_get(&t, &t.drains), 2);
  CHECK_EQ(spool_group_destroy(g), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  tally_destroy(&t);
}

/* Group tasks at each priority: with the one worker held, high runs before normal before low. */
typedef struct {
  pthread_mutex_t mu;
  int order[3];
  int n;
} order_t;
typedef struct {
  order_t* o;
  int level;
} level_arg_t;
static void record_level(void* arg) {
  level_arg_t* a = (level_arg_t*)arg;
  pthread_mutex_lock(&a->o->mu);
  a->o->order[a->o->n++] = a->level;
  pthread_mutex_unlock(&a->o->mu);
}
static void test_priorities(void) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 1;
  cfg.aging_ms = 0;
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  spool_group* g = NULL;
  CHECK_EQ(spool_group_create(pool, NULL, &g), SPOOL_OK);
  order_t o;
  pthread_mutex_init(&o.mu, NULL);
  o.n = 0;
  level_arg_t args[3] = {
      {&o, SPOOL_PRIORITY_LOW}, {&o, SPOOL_PRIORITY_NORMAL}, {&o, SPOOL_PRIORITY_HIGH}};
  hold_t h;
  hold_init(&h);
  CHECK_EQ(spool_group_submit(g, hold_task, &h, NULL), SPOOL_OK);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ(spool_group_submit_priority(g, args[i].level, record_level, &args[i], NULL), SPOOL_OK);
  }
  hold_release(&h);
  CHECK_EQ(spool_group_wait(g, -1), SPOOL_OK);
  CHECK_EQ(o.n, 3);
  CHECK_EQ(o.order[0], SPOOL_PRIORITY_HIGH);
  CHECK_EQ(o.order[1], SPOOL_PRIORITY_NORMAL);
  CHECK_EQ(o.order[2], SPOOL_PRIORITY_LOW);
  hold_destroy(&h);
  pthread_mutex_destroy(&o.mu);
  CHECK_EQ(spool_group_destroy(g), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
}

/* A timed wait times out while the group's task is held, and succeeds once it is released. */
static void test_wait_timeout(void) {
  spool_pool* pool = make_pool(2);
  hold_t h;
  hold_init(&h);
  spool_group* g = NULL;
  CHECK_EQ(spool_group_create(pool, NULL, &g), SPOOL_OK);
  CHECK_EQ(spool_group_submit(g, hold_task, &h, NULL), SPOOL_OK);
  hold_wait_started(&h, 1);
  CHECK_EQ(spool_group_wait(g, 0), SPOOL_ETIMEDOUT);
  CHECK_EQ(spool_group_wait(g, 20), SPOOL_ETIMEDOUT);
  hold_release(&h);
  CHECK_EQ(spool_group_wait(g, -1), SPOOL_OK);
  CHECK_EQ(spool_group_wait(g, 0), SPOOL_OK);
  CHECK_EQ(spool_group_destroy(g), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  hold_destroy(&h);
}

/* Cancelled while the only worker is held: no queued fn runs, each on_cancel hook is called
 * once, the wait and the drain report SPOOL_ECANCELED, and later submissions are accepted and
 * skipped the same way. The pool counts them as cancelled. */
static void test_cancel_calls_on_cancel(void) {
  spool_pool* pool = make_pool(1);
  hold_t h;
  hold_init(&h);
  tally_t t;
  tally_init(&t);
  CHECK_EQ(hold_worker(pool, &h), SPOOL_OK);
  spool_group* g = NULL;
  CHECK_EQ(spool_group_create(pool, NULL, &g), SPOOL_OK);
  CHECK_EQ(spool_group_on_finished(g, count_drain, &t), SPOOL_OK);
  for (int i = 0; i < 10; ++i) {
    CHECK_EQ(spool_group_submit(g, count_run, &t, count_cancel), SPOOL_OK);
  }
  CHECK_EQ(spool_group_submit(g, count_run, &t, NULL), SPOOL_OK); /* no hook: just skipped */
  CHECK_EQ(spool_group_cancel(g), SPOOL_OK);
  CHECK_EQ(spool_group_cancel(g), SPOOL_OK);
  CHECK_EQ(spool_group_is_cancelled(g), 1);
  hold_release(&h);
  CHECK_EQ(spool_group_wait(g, -1), SPOOL_ECANCELED);
  CHECK_EQ(tally_get(&t, &t.ran), 0);
  CHECK_EQ(tally_get(&t, &t.cancelled), 10);
  CHECK_EQ(tally_get(&t, &t.drains), 1);
  CHECK_EQ(tally_get(&t, &t.last_status), SPOOL_ECANCELED);

  CHECK_EQ(spool_group_submit(g, count_run, &t, count_cancel), SPOOL_OK);
  CHECK_EQ(spool_group_wait(g, 60000), SPOOL_ECANCELED);
  CHECK_EQ(tally_get(&t, &t.ran), 0);
  CHECK_EQ(tally_get(&t, &t.cancelled), 11);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  spool_stats s;
  CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  CHECK_EQ(s.cancelled, 12);
  CHECK_EQ(spool_group_destroy(g), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  hold_destroy(&h);
  tally_destroy(&t);
}

/* A nested group: the parent's wait covers the child's task; cancelling the parent cancels
 * the child; the parent may be destroyed first. */
static void test_nested_groups(void) {
  spool_pool* pool = make_pool(2);
  hold_t h;
  hold_init(&h);
  tally_t t;
  tally_init(&t);
  spool_group *parent = NULL, *child = NULL;
  CHECK_EQ(spool_group_create(pool, NULL, &parent), SPOOL_OK);
  CHECK_EQ(spool_group_create(pool, parent, &child), SPOOL_OK);
  CHECK_EQ(spool_group_submit(child, hold_task, &h, NULL), SPOOL_OK);
  hold_wait_started(&h, 1);
  CHECK_EQ(spool_group_wait(parent, 20), SPOOL_ETIMEDOUT);
  hold_release(&h);
  CHECK_EQ(spool_group_wait(parent, -1), SPOOL_OK);
  CHECK_EQ(spool_group_wait(child, 0), SPOOL_OK);

  CHECK_EQ(spool_group_cancel(parent), SPOOL_OK);
  CHECK_EQ(spool_group_is_cancelled(child), 1);
  CHECK_EQ(spool_group_submit(child, count_run, &t, count_cancel), SPOOL_OK);
  CHECK_EQ(spool_group_destroy(parent), SPOOL_OK);
  CHECK_EQ(spool_group_wait(child, -1), SPOOL_ECANCELED);
  CHECK_EQ(tally_get(&t, &t.ran), 0);
  CHECK_EQ(tally_get(&t, &t.cancelled), 1);
  CHECK_EQ(spool_group_destroy(child), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  hold_destroy(&h);
  tally_destroy(&t);
}

typedef struct {
  spool_pool* pool;
  tally_t* tally;
  int rc_create, rc_wait, rc_destroy;
} inner_arg;

/* Runs inside a task: a group on the task's own pool, filled and waited for. */
static void group_inside_task(void* arg) {
  inner_arg* a = arg;
  spool_group* g = NULL;
  a->rc_create = spool_group_create(a->pool, NULL, &g);
  if (a->rc_create != SPOOL_OK) return;
  for (int i = 0; i < 20; ++i) spool_group_submit(g, count_run, a->tally, NULL);
  a->rc_wait = spool_group_wait(g, -1);
  a->rc_destroy = spool_group_destroy(g);
}

/* On a one-thread pool, a task that waits on a group must run the group's tasks itself. */
static void test_group_inside_a_task(void) {
  spool_pool* pool = make_pool(1);
  tally_t t;
  tally_init(&t);
  inner_arg a = {pool, &t, -1, -1, -1};
  spool_group* outer = NULL;
  CHECK_EQ(spool_group_create(pool, NULL, &outer), SPOOL_OK);
  CHECK_EQ(spool_group_submit(outer, group_inside_task, &a, NULL), SPOOL_OK);
  CHECK_EQ(spool_group_wait(outer, -1), SPOOL_OK);
  CHECK_EQ(a.rc_create, SPOOL_OK);
  CHECK_EQ(a.rc_wait, SPOOL_OK);
  CHECK_EQ(a.rc_destroy, SPOOL_OK);
  CHECK_EQ(tally_get(&t, &t.ran), 20);
  CHECK_EQ(spool_group_destroy(outer), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  tally_destroy(&t);
}

typedef struct {
  spool_pool* pool;
  tally_t* tally;
  hold_t* blocked; /* the unrelated task waits here until the region's wait has returned */
  int rc_isolate;
  int rc_wait;
} region_arg;

static void region_body(void* arg) {
  region_arg* a = arg;
  spool_group* g = NULL;
  if (spool_group_create(a->pool, NULL, &g) != SPOOL_OK) return;
  for (int i = 0; i < 20; ++i) spool_group_submit(g, count_run, a->tally, NULL);
  a->rc_wait = spool_group_wait(g, -1);
  spool_group_destroy(g);
}

/* Queues an unrelated task (high priority: a wait's search meets it first) that holds until
 * released, then waits on a group inside a region, then releases it. Without the region the
 * lone worker's wait would run the held task and never come back. */
static void waits_then_releases(void* arg) {
  region_arg* a = arg;
  spool_submit_priority(a->pool, SPOOL_PRIORITY_HIGH, hold_task, a->blocked, NULL);
  a->rc_isolate = spool_isolate(a->pool, region_body, a);
  hold_release(a->blocked);
}

static void test_isolate(void) {
  spool_pool* pool = make_pool(1);
  tally_t t;
  tally_init(&t);
  hold_t h;
  hold_init(&h);
  CHECK_EQ(spool_isolate(NULL, noop, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_isolate(pool, NULL, NULL), SPOOL_EINVAL);
  /* Off a worker fn just runs. */
  region_arg outside = {pool, &t, &h, -1, -1};
  CHECK_EQ(spool_isolate(pool, region_body, &outside), SPOOL_OK);
  CHECK_EQ(outside.rc_wait, SPOOL_OK);
  CHECK_EQ(tally_get(&t, &t.ran), 20);

  region_arg a = {pool, &t, &h, -1, -1};
  CHECK_EQ(spool_submit(pool, waits_then_releases, &a), SPOOL_OK);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(a.rc_isolate, SPOOL_OK);
  CHECK_EQ(a.rc_wait, SPOOL_OK);
  CHECK_EQ(tally_get(&t, &t.ran), 40);
  pthread_mutex_lock(&h.mu);
  CHECK_EQ(h.started, 1);
  pthread_mutex_unlock(&h.mu);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  hold_destroy(&h);
  tally_destroy(&t);
}

/* spool_shutdown(DISCARD) drops the group's queued tasks: each on_cancel runs, and the group's
 * waiter wakes with SPOOL_ECANCELED while the pool's one worker is still held. */
static void test_shutdown_discard(void) {
  spool_pool* pool = make_pool(1);
  hold_t h;
  hold_init(&h);
  tally_t t;
  tally_init(&t);
  CHECK_EQ(hold_worker(pool, &h), SPOOL_OK);
  spool_group* g = NULL;
  CHECK_EQ(spool_group_create(pool, NULL, &g), SPOOL_OK);
  for (int i = 0; i < 15; ++i) {
    CHECK_EQ(spool_group_submit(g, count_run, &t, count_cancel), SPOOL_OK);
  }
  shutdown_arg a = {pool, 0, -1};
  pthread_t stopper;
  CHECK_EQ(pthread_create(&stopper, NULL, shutdown_discard_thread, &a), 0);
  CHECK_EQ(spool_group_wait(g, -1), SPOOL_ECANCELED);
  CHECK_EQ(tally_get(&t, &t.cancelled), 15);
  hold_release(&h);
  pthread_join(stopper, NULL);
  CHECK_EQ(a.rc, SPOOL_OK);
  CHECK_EQ(a.dropped, 15);
  CHECK_EQ(tally_get(&t, &t.ran), 0);
  CHECK_EQ(spool_group_is_cancelled(g), 1);
  CHECK_EQ(spool_group_submit(g, count_run, &t, count_cancel), SPOOL_ESHUTDOWN);
  CHECK_EQ(tally_get(&t, &t.cancelled), 15); /* a refused task's hook is not called */
  CHECK_EQ(spool_group_destroy(g), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  hold_destroy(&h);
  tally_destroy(&t);
}

int main(void) {
  check_watchdog(120);
  test_invalid_arguments();
  test_submit_wait_and_on_finished();
  test_wait_timeout();
  test_priorities();
  test_cancel_calls_on_cancel();
  test_nested_groups();
  test_group_inside_a_task();
  test_isolate();
  test_shutdown_discard();
  if (check_report("test_c_group") != 0) return 1;
  printf("test_c_group: all checks passed\n");
  return 0;
}
