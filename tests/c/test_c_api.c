/* The C API (spool.h) from a C11 program: configuration, submission, every error code, the
 * full-queue policies, shutdown with on_cancel hooks, calls from inside a task, and stats.
 * Returns 0 if every check passed; otherwise prints each failed check and returns 1. */
#define _POSIX_C_SOURCE 200809L

#include <spool/spool.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "hold.h"

/* ---- helpers: holding workers, counting runs and cancellations (mutex + condvar) ---- */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long sum;
  int ran;
  int cancelled;
  pthread_t cancelled_on;
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

static int tally_ran(tally_t* t) {
  pthread_mutex_lock(&t->mu);
  int n = t->ran;
  pthread_mutex_unlock(&t->mu);
  return n;
}

static int tally_cancelled(tally_t* t) {
  pthread_mutex_lock(&t->mu);
  int n = t->cancelled;
  pthread_mutex_unlock(&t->mu);
  return n;
}

static void count_run(void* arg) {
  tally_t* t = arg;
  pthread_mutex_lock(&t->mu);
  ++t->ran;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static void count_cancel(void* arg) {
  tally_t* t = arg;
  pthread_mutex_lock(&t->mu);
  ++t->cancelled;
  t->cancelled_on = pthread_self();
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

/* Waits up to `seconds` for `n` cancellations; returns whether they all came. The bound only
 * turns a missing cancellation into a failed check instead of a hang. */
static int tally_wait_cancelled(tally_t* t, int n, int seconds) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += seconds;
  int ok = 1;
  pthread_mutex_lock(&t->mu);
  while (t->cancelled < n && ok) ok = pthread_cond_timedwait(&t->cv, &t->mu, &deadline) == 0;
  ok = t->cancelled >= n;
  pthread_mutex_unlock(&t->mu);
  return ok;
}

typedef struct {
  tally_t* tally;
  long value;
} add_arg;

static void add_value(void* arg) {
  add_arg* a = arg;
  pthread_mutex_lock(&a->tally->mu);
  a->tally->sum += a->value;
  ++a->tally->ran;
  pthread_mutex_unlock(&a->tally->mu);
}

static spool_pool* make_pool(unsigned threads, size_t capacity, spool_full_policy on_full) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = threads;
  cfg.queue_capacity = capacity;
  cfg.on_full = on_full;
  cfg.block_timeout_ms = 20;
  spool_pool* pool = NULL;
  int rc = spool_create(&cfg, &pool);
  CHECK_EQ(rc, SPOOL_OK);
  if (rc != SPOOL_OK || pool == NULL) {
    fprintf(stderr, "spool_create failed: %s\n", spool_strerror(rc));
    exit(1);
  }
  return pool;
}

/* A pool of one thread that hold_task holds (hold_worker): what is submitted next is queued. */
static spool_pool* make_held_pool(hold_t* hold, size_t capacity, spool_full_policy on_full) {
  hold_init(hold);
  spool_pool* pool = make_pool(1, capacity, on_full);
  CHECK_EQ(hold_worker(pool, hold), SPOOL_OK);
  return pool;
}

/* ---- the tests ---- */

/* The C defaults are the C++ config's: every CPU, unbounded, block, 1 s, "spool", 64 rounds. */
static void test_config_defaults(void) {
  spool_config cfg;
  memset(&cfg, 0xAB, sizeof cfg);
  spool_config_init(&cfg);
  CHECK_EQ(cfg.threads, 0);
  CHECK_EQ(cfg.queue_capacity, 0);
  CHECK_EQ(cfg.on_full, SPOOL_FULL_BLOCK);
  CHECK_EQ(cfg.block_timeout_ms, 1000);
  CHECK(cfg.name == NULL || strcmp(cfg.name, "spool") == 0);
  CHECK_EQ(cfg.spin_rounds, 64);
  CHECK_EQ(cfg.defer_period_us, 1000);
}

/* The codes are the documented numbers; spool_strerror gives a distinct non-empty text for
 * each, and a non-empty text of its own for a code it does not know. */
static void test_error_codes_and_strings(void) {
  CHECK_EQ(SPOOL_OK, 0);
  CHECK_EQ(SPOOL_EFULL, 1);
  CHECK_EQ(SPOOL_ETIMEDOUT, 2);
  CHECK_EQ(SPOOL_ESHUTDOWN, 3);
  CHECK_EQ(SPOOL_EINVAL, 4);
  CHECK_EQ(SPOOL_EDEADLK, 5);
  CHECK_EQ(SPOOL_ECANCELED, 6);
  CHECK_EQ(SPOOL_ENOMEM, 7);
  CHECK_EQ(SPOOL_ESYSTEM, 8);
  const char* text[9];
  for (int code = 0; code <= 8; ++code) {
    text[code] = spool_strerror(code);
    CHECK(text[code] != NULL);
    if (text[code] == NULL) return;
    CHECK(strlen(text[code]) > 0);
    for (int other = 0; other < code; ++other) CHECK(strcmp(text[code], text[other]) != 0);
  }
  const int unknown[] = {9, -1, 1000};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; ++i) {
    const char* s = spool_strerror(unknown[i]);
    CHECK(s != NULL);
    if (s == NULL) continue;
    CHECK(strlen(s) > 0);
    for (int code = 0; code <= 8; ++code) CHECK(strcmp(s, text[code]) != 0);
  }
}

/* A NULL cfg means the defaults; 1000 submissions add up to 500500 after spool_wait_idle. */
static void test_create_default_and_sum(void) {
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(NULL, &pool), SPOOL_OK);
  CHECK(pool != NULL);
  if (pool == NULL) return;
  tally_t tally;
  tally_init(&tally);
  add_arg args[1000];
  for (int i = 0; i < 1000; ++i) {
    args[i].tally = &tally;
    args[i].value = i + 1;
    CHECK_EQ(spool_submit(pool, add_value, &args[i]), SPOOL_OK);
  }
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(tally.sum, 500500);
  CHECK_EQ(tally_ran(&tally), 1000);

  spool_stats s;
  CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  CHECK_EQ(s.submitted, 1000);
  CHECK_EQ(s.completed, 1000);
  CHECK_EQ(s.failed, 0);
  CHECK_EQ(s.rejected, 0);
  CHECK_EQ(s.cancelled, 0);
  CHECK_EQ(s.queued, 0);
  CHECK_EQ(s.threads_busy, 0);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  tally_destroy(&tally);
}

typedef struct {
  hold_t* hold;
  int index;
} index_arg;

static void record_index_and_hold(void* arg) {
  index_arg* a = arg;
  a->index = spool_worker_index();
  hold_task(a->hold);
}

/* A configured pool has that many workers, indexed 0..n-1; outside a pool the index is -1. */
static void test_create_with_config(void) {
  CHECK_EQ(spool_worker_index(), -1);
  spool_pool* pool = make_pool(3, 0, SPOOL_FULL_BLOCK);
  hold_t hold;
  hold_init(&hold);
  index_arg args[3];
  for (int i = 0; i < 3; ++i) {
    args[i].hold = &hold;
    args[i].index = -2;
    CHECK_EQ(spool_submit(pool, record_index_and_hold, &args[i]), SPOOL_OK);
  }
  hold_wait_started(&hold, 3);
  spool_stats s;
  CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  CHECK_EQ(s.threads_live, 3);
  CHECK_EQ(s.threads_busy, 3);
  hold_release(&hold);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  int seen[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    CHECK(args[i].index >= 0 && args[i].index < 3);
    if (args[i].index >= 0 && args[i].index < 3) ++seen[args[i].index];
  }
  CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
  CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  CHECK_EQ(s.threads_busy, 0);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  hold_destroy(&hold);
}

/* NULL pointers and bad config values are SPOOL_EINVAL, and never call fn. */
static void test_invalid_arguments(void) {
  tally_t tally;
  tally_init(&tally);
  spool_config cfg;
  spool_config_init(&cfg);
  CHECK_EQ(spool_create(&cfg, NULL), SPOOL_EINVAL);

  spool_pool* pool = make_pool(1, 0, SPOOL_FULL_BLOCK);
  CHECK_EQ(spool_submit(NULL, count_run, &tally), SPOOL_EINVAL);
  CHECK_EQ(spool_submit(pool, NULL, &tally), SPOOL_EINVAL);
  CHECK_EQ(spool_submit_ex(NULL, count_run, &tally, count_cancel), SPOOL_EINVAL);
  CHECK_EQ(spool_submit_ex(pool, NULL, &tally, count_cancel), SPOOL_EINVAL);
  CHECK_EQ(spool_wait_idle(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_close(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_shutdown(NULL, SPOOL_SHUTDOWN_DRAIN, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_destroy(NULL), SPOOL_EINVAL);
  spool_stats s;
  CHECK_EQ(spool_get_stats(NULL, &s), SPOOL_EINVAL);
  CHECK_EQ(spool_get_stats(pool, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_shutdown(pool, (spool_shutdown_mode)7, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(tally.ran, 0);
  CHECK_EQ(tally.cancelled, 0);
  tally_destroy(&tally);
}

/* Each full-queue policy, with the only worker held and the queue (capacity 1) full. */
static void test_full_policies(void) {
  /* reject: SPOOL_EFULL; a refused task calls neither fn nor on_cancel. */
  {
    tally_t queued, refused;
    tally_init(&queued);
    tally_init(&refused);
    hold_t hold;
    spool_pool* pool = make_held_pool(&hold, 1, SPOOL_FULL_REJECT);
    CHECK_EQ(spool_submit(pool, count_run, &queued), SPOOL_OK);
    CHECK_EQ(spool_submit(pool, count_run, &refused), SPOOL_EFULL);
    CHECK_EQ(spool_submit_ex(pool, count_run, &refused, count_cancel), SPOOL_EFULL);
    spool_stats s;
    CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
    CHECK_EQ(s.rejected, 2);
    CHECK_EQ(s.queued, 1);
    hold_release(&hold);
    CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
    CHECK_EQ(tally_ran(&queued), 1);
    CHECK_EQ(refused.ran, 0);
    CHECK_EQ(refused.cancelled, 0);
    CHECK_EQ(spool_destroy(pool), SPOOL_OK);
    tally_destroy(&queued);
    tally_destroy(&refused);
    hold_destroy(&hold);
  }
  /* block with a timeout: SPOOL_ETIMEDOUT after block_timeout_ms (20 ms). */
  {
    tally_t refused;
    tally_init(&refused);
    hold_t hold;
    spool_pool* pool = make_held_pool(&hold, 1, SPOOL_FULL_BLOCK_TIMEOUT);
    CHECK_EQ(spool_submit(pool, count_run, &refused), SPOOL_OK);
    CHECK_EQ(spool_submit(pool, count_run, &refused), SPOOL_ETIMEDOUT);
    hold_release(&hold);
    CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
    CHECK_EQ(tally_ran(&refused), 1);
    CHECK_EQ(spool_destroy(pool), SPOOL_OK);
    tally_destroy(&refused);
    hold_destroy(&hold);
  }
  /* caller runs: the task runs inside spool_submit, on the calling thread. */
  {
    tally_t inline_run;
    tally_init(&inline_run);
    hold_t hold;
    spool_pool* pool = make_held_pool(&hold, 1, SPOOL_FULL_CALLER_RUNS);
    CHECK_EQ(spool_submit(pool, count_run, &inline_run), SPOOL_OK); /* queued */
    CHECK_EQ(spool_submit(pool, count_run, &inline_run), SPOOL_OK); /* runs here */
    CHECK_EQ(tally_ran(&inline_run), 1);
    hold_release(&hold);
    CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
    CHECK_EQ(tally_ran(&inline_run), 2);
    CHECK_EQ(spool_destroy(pool), SPOOL_OK);
    tally_destroy(&inline_run);
    hold_destroy(&hold);
  }
  /* discard oldest: the oldest task's on_cancel runs (on the submitting thread), not its fn. */
  {
    tally_t oldest, newest;
    tally_init(&oldest);
    tally_init(&newest);
    hold_t hold;
    spool_pool* pool = make_held_pool(&hold, 1, SPOOL_FULL_DISCARD_OLDEST);
    CHECK_EQ(spool_submit_ex(pool, count_run, &oldest, count_cancel), SPOOL_OK);
    CHECK_EQ(spool_submit_ex(pool, count_run, &newest, count_cancel), SPOOL_OK);
    CHECK_EQ(tally_cancelled(&oldest), 1);
    CHECK(pthread_equal(oldest.cancelled_on, pthread_self()));
    spool_stats s;
    CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
    CHECK_EQ(s.cancelled, 1);
    hold_release(&hold);
    CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
    CHECK_EQ(oldest.ran, 0);
    CHECK_EQ(newest.ran, 1);
    CHECK_EQ(newest.cancelled, 0);
    CHECK_EQ(spool_destroy(pool), SPOOL_OK);
    tally_destroy(&oldest);
    tally_destroy(&newest);
    hold_destroy(&hold);
  }
}

/* After spool_close, and after spool_shutdown, submissions are SPOOL_ESHUTDOWN and never run;
 * what was queued before spool_close still runs. */
static void test_shutdown_refusals(void) {
  tally_t queued, refused;
  tally_init(&queued);
  tally_init(&refused);

  hold_t hold;
  spool_pool* pool = make_held_pool(&hold, 0, SPOOL_FULL_BLOCK);
  CHECK_EQ(spool_submit(pool, count_run, &queued), SPOOL_OK);
  CHECK_EQ(spool_close(pool), SPOOL_OK);
  CHECK_EQ(spool_submit(pool, count_run, &refused), SPOOL_ESHUTDOWN);
  CHECK_EQ(spool_submit_ex(pool, count_run, &refused, count_cancel), SPOOL_ESHUTDOWN);
  CHECK_EQ(spool_close(pool), SPOOL_OK);
  hold_release(&hold);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(tally_ran(&queued), 1);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);

  pool = make_pool(2, 0, SPOOL_FULL_BLOCK);
  size_t dropped = 99;
  CHECK_EQ(spool_shutdown(pool, SPOOL_SHUTDOWN_DRAIN, &dropped), SPOOL_OK);
  CHECK_EQ(dropped, 0);
  CHECK_EQ(spool_submit(pool, count_run, &refused), SPOOL_ESHUTDOWN);
  CHECK_EQ(spool_shutdown(pool, SPOOL_SHUTDOWN_DISCARD, NULL), SPOOL_OK); /* twice is fine */
  spool_stats s;
  CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  CHECK_EQ(s.rejected, 1);
  CHECK_EQ(s.threads_live, 0);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);

  CHECK_EQ(refused.ran, 0);
  CHECK_EQ(refused.cancelled, 0);
  tally_destroy(&queued);
  tally_destroy(&refused);
  hold_destroy(&hold);
}

/* spool_shutdown(DISCARD) drops the queued tasks (not the running one) and calls each one's
 * on_cancel; it reports how many it dropped. The worker is released only after every hook ran,
 * so the count is exact. */
static void test_shutdown_discard_calls_on_cancel(void) {
  enum { queued = 20 };
  tally_t tally;
  tally_init(&tally);
  hold_t hold;
  spool_pool* pool = make_held_pool(&hold, 0, SPOOL_FULL_BLOCK);
  for (int i = 0; i < queued; ++i) {
    CHECK_EQ(spool_submit_ex(pool, count_run, &tally, count_cancel), SPOOL_OK);
  }
  shutdown_arg arg = {pool, 0, -1};
  pthread_t stopper;
  CHECK_EQ(pthread_create(&stopper, NULL, shutdown_discard_thread, &arg), 0);
  int all_dropped_while_held = tally_wait_cancelled(&tally, queued, 10);
  CHECK(all_dropped_while_held);
  hold_release(&hold);
  pthread_join(stopper, NULL);
  CHECK_EQ(arg.rc, SPOOL_OK);
  CHECK_EQ(arg.dropped, queued);
  CHECK_EQ(tally.cancelled, queued);
  CHECK_EQ(tally.ran, 0);
  spool_stats s;
  CHECK_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  CHECK_EQ(s.cancelled, queued);
  CHECK_EQ(s.completed, 1);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  tally_destroy(&tally);
  hold_destroy(&hold);
}

typedef struct {
  spool_pool* pool;
  int wait_rc, shutdown_rc, destroy_rc;
} inside_arg;

static void blocking_calls_inside(void* arg) {
  inside_arg* a = arg;
  a->wait_rc = spool_wait_idle(a->pool);
  a->shutdown_rc = spool_shutdown(a->pool, SPOOL_SHUTDOWN_DRAIN, NULL);
  a->destroy_rc = spool_destroy(a->pool);
}

/* From inside a task, the blocking calls return SPOOL_EDEADLK and free nothing. */
static void test_blocking_calls_from_a_task(void) {
  spool_pool* pool = make_pool(2, 0, SPOOL_FULL_BLOCK);
  inside_arg arg = {pool, -1, -1, -1};
  CHECK_EQ(spool_submit(pool, blocking_calls_inside, &arg), SPOOL_OK);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(arg.wait_rc, SPOOL_EDEADLK);
  CHECK_EQ(arg.shutdown_rc, SPOOL_EDEADLK);
  CHECK_EQ(arg.destroy_rc, SPOOL_EDEADLK);
  /* The pool is intact and usable. */
  tally_t tally;
  tally_init(&tally);
  CHECK_EQ(spool_submit(pool, count_run, &tally), SPOOL_OK);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(tally_ran(&tally), 1);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  tally_destroy(&tally);
}

typedef struct {
  spool_pool* pool;
  hold_t* queue_full; /* released by main once the bounded queue is full */
  tally_t* children;
  int refusals;
} spawner_arg;

static void spawn_children(void* arg) {
  spawner_arg* a = arg;
  hold_task(a->queue_full);
  for (int i = 0; i < 500; ++i) {
    if (spool_submit(a->pool, count_run, a->children) != SPOOL_OK) ++a->refusals;
  }
}

/* A task's own submissions ignore the bound: with capacity 1, the queue full and the policy
 * reject, all 500 are accepted. */
static void test_worker_submissions_ignore_the_bound(void) {
  hold_t queue_full;
  hold_init(&queue_full);
  tally_t children, filler;
  tally_init(&children);
  tally_init(&filler);
  spool_pool* pool = make_pool(1, 1, SPOOL_FULL_REJECT);
  spawner_arg arg = {pool, &queue_full, &children, 0};
  CHECK_EQ(spool_submit(pool, spawn_children, &arg), SPOOL_OK);
  hold_wait_started(&queue_full, 1);
  CHECK_EQ(spool_submit(pool, count_run, &filler), SPOOL_OK);
  CHECK_EQ(spool_submit(pool, count_run, &filler), SPOOL_EFULL);
  hold_release(&queue_full);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(arg.refusals, 0);
  CHECK_EQ(tally_ran(&children), 500);
  CHECK_EQ(tally_ran(&filler), 1);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  tally_destroy(&children);
  tally_destroy(&filler);
  hold_destroy(&queue_full);
}

/* An on_full value outside the enum is SPOOL_EINVAL, and *out is set to NULL. (Run last: a C
 * caller may store any int in the field, and a library that reads it back as a C++ enum trips
 * UBSan's -fsanitize=enum, which would stop the program before the other checks.) */
static void test_bad_policy_value(void) {
  spool_config cfg;
  spool_config_init(&cfg);
  static char sentinel;
  spool_pool* bad = (spool_pool*)&sentinel; /* must be overwritten with NULL */
  cfg.on_full = (spool_full_policy)99;
  CHECK_EQ(spool_create(&cfg, &bad), SPOOL_EINVAL);
  CHECK(bad == NULL);
}

int main(void) {
  check_watchdog(120);
  test_config_defaults();
  test_error_codes_and_strings();
  test_create_default_and_sum();
  test_create_with_config();
  test_invalid_arguments();
  test_full_policies();
  test_shutdown_refusals();
  test_shutdown_discard_calls_on_cancel();
  test_blocking_calls_from_a_task();
  test_worker_submissions_ignore_the_bound();
  test_bad_policy_value();
  if (check_report("test_c_api") != 0) return 1;
  printf("test_c_api: all checks passed\n");
  return 0;
}
