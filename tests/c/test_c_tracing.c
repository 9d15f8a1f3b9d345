/* The C API's additions for tracing and lifecycle: task hooks in spool_config,
 * spool_submit_named, spool_this_pool, and spool_shutdown_timed's report. Returns 0 if every
 * check passed. */
#define _POSIX_C_SOURCE 200809L

#include <spool/spool.h>

#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "check.h"
#include "hold.h"

typedef struct {
  pthread_mutex_t mu;
  int starts;
  int finishes;
  int named_finishes; /* finishes of tasks named "job" */
  int cancelled;
} trace_t;

static void on_start(const spool_task_info* task, void* arg) {
  trace_t* t = arg;
  (void)task;
  pthread_mutex_lock(&t->mu);
  ++t->starts;
  pthread_mutex_unlock(&t->mu);
}

static void on_finish(const spool_task_info* task, spool_task_end end, void* arg) {
  trace_t* t = arg;
  pthread_mutex_lock(&t->mu);
  ++t->finishes;
  if (task->name != NULL && strcmp(task->name, "job") == 0 && task->worker_index >= 0) {
    ++t->named_finishes;
  }
  if (end == SPOOL_TASK_CANCELLED) ++t->cancelled;
  pthread_mutex_unlock(&t->mu);
}

static void nothing(void* arg) { (void)arg; }

static void record_pool(void* arg) { *(spool_pool**)arg = spool_this_pool(); }

static void test_hooks_and_names(void) {
  trace_t t;
  memset(&t, 0, sizeof t);
  pthread_mutex_init(&t.mu, NULL);
  spool_config cfg;
  spool_config_init(&cfg);
  CHECK(cfg.on_task_start == NULL && cfg.on_task_finish == NULL && cfg.task_hook_arg == NULL);
  cfg.threads = 2;
  cfg.on_task_start = on_start;
  cfg.on_task_finish = on_finish;
  cfg.task_hook_arg = &t;
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  for (int i = 0; i < 10; ++i) {
    CHECK_EQ(spool_submit_named(pool, SPOOL_PRIORITY_NORMAL, "job", nothing, NULL, NULL), SPOOL_OK);
  }
  CHECK_EQ(spool_submit(pool, nothing, NULL), SPOOL_OK);
  spool_pool* seen = NULL;
  CHECK_EQ(spool_submit(pool, record_pool, &seen), SPOOL_OK);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK(seen == pool);
  CHECK(spool_this_pool() == NULL);
  CHECK_EQ(spool_submit_named(NULL, SPOOL_PRIORITY_NORMAL, "x", nothing, NULL, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_submit_named(pool, 7, "x", nothing, NULL, NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(t.starts, 12);
  CHECK_EQ(t.finishes, 12);
  CHECK_EQ(t.named_finishes, 10);
  CHECK_EQ(t.cancelled, 0);
  pthread_mutex_destroy(&t.mu);
}

static int dropped_calls = 0;
static void count_drop(void* arg) {
  (void)arg;
  __atomic_add_fetch(&dropped_calls, 1, __ATOMIC_RELAXED);
}

typedef struct {
  spool_pool* pool;
  hold_t* hold;
} opener_t;

/* Opens the hold once the timer and, at the deadline, the queued tasks are dropped (their
 * on_cancel ran): the held task is the one running when the deadline passes. */
static void* open_after_drop(void* arg) {
  opener_t* o = arg;
  while (__atomic_load_n(&dropped_calls, __ATOMIC_RELAXED) < 3) sched_yield();
  hold_release(o->hold);
  return NULL;
}

static void test_shutdown_timed(void) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 1;
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  hold_t hold;
  hold_init(&hold);
  CHECK_EQ(hold_worker(pool, &hold), SPOOL_OK);
  CHECK_EQ(spool_submit_ex(pool, nothing, NULL, count_drop), SPOOL_OK);
  CHECK_EQ(spool_submit_ex(pool, nothing, NULL, count_drop), SPOOL_OK);
  CHECK_EQ(spool_post_after(pool, 3600000000000ull, nothing, NULL, count_drop, NULL), SPOOL_OK);
  CHECK_EQ(spool_shutdown_timed(pool, -1, NULL), SPOOL_EINVAL);
  opener_t o = {pool, &hold};
  pthread_t opener;
  CHECK_EQ(pthread_create(&opener, NULL, open_after_drop, &o), 0);
  spool_shutdown_report r;
  memset(&r, 0, sizeof r);
  CHECK_EQ(spool_shutdown_timed(pool, 5, &r), SPOOL_OK);
  pthread_join(opener, NULL);
  CHECK_EQ(r.timed_out, 1);
  CHECK_EQ(r.dropped, 3u);
  CHECK_EQ(r.timers_dropped, 1u);
  CHECK_EQ(__atomic_load_n(&dropped_calls, __ATOMIC_RELAXED), 3);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(spool_shutdown_timed(spool_default_pool(), 5, NULL), SPOOL_EINVAL);
  hold_destroy(&hold);
}

int main(void) {
  check_watchdog(120);
  test_hooks_and_names();
  test_shutdown_timed();
  return check_report("test_c_tracing");
}
