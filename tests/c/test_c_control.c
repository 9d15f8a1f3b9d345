/* The C API's worker hooks, CPU affinity, run-time control (spool_resize, spool_pause,
 * spool_resume, spool_wait_idle_for) and the process-wide pool, from a C11 program. Every
 * wait is on a mutex and condition variable or on spool_wait_idle; a short spool_wait_idle_for
 * is used only where state decides its answer (a paused pool with queued work).
 * Returns 0 if every check passed; otherwise prints each failed check and returns 1. */
#define _GNU_SOURCE

#include <spool/spool.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* ---- hooks: each start and stop, with its thread ---- */

#define MAX_EVENTS 64

typedef struct {
  pthread_mutex_t mu;
  int starts, stops;
  unsigned start_index[MAX_EVENTS], stop_index[MAX_EVENTS];
  pthread_t start_thread[MAX_EVENTS], stop_thread[MAX_EVENTS];
  int start_as_worker[MAX_EVENTS]; /* spool_worker_index() inside the start hook */
} hooks_t;

static void on_start(unsigned index, void* arg) {
  hooks_t* h = arg;
  pthread_mutex_lock(&h->mu);
  if (h->starts < MAX_EVENTS) {
    h->start_index[h->starts] = index;
    h->start_thread[h->starts] = pthread_self();
    h->start_as_worker[h->starts] = spool_worker_index();
  }
  ++h->starts;
  pthread_mutex_unlock(&h->mu);
}

static void on_stop(unsigned index, void* arg) {
  hooks_t* h = arg;
  pthread_mutex_lock(&h->mu);
  if (h->stops < MAX_EVENTS) {
    h->stop_index[h->stops] = index;
    h->stop_thread[h->stops] = pthread_self();
  }
  ++h->stops;
  pthread_mutex_unlock(&h->mu);
}

static void test_hooks(void) {
  hooks_t h;
  memset(&h, 0, sizeof h);
  pthread_mutex_init(&h.mu, NULL);
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 3;
  cfg.on_worker_start = on_start;
  cfg.on_worker_stop = on_stop;
  cfg.worker_hook_arg = &h;
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(h.starts, 3);
  CHECK_EQ(h.stops, 3);
  for (int i = 0; i < h.starts && i < MAX_EVENTS; ++i) {
    CHECK_EQ(h.start_as_worker[i], (int)h.start_index[i]);
    int matched = 0;
    for (int j = 0; j < h.stops && j < MAX_EVENTS; ++j) {
      matched +=
          pthread_equal(h.start_thread[i], h.stop_thread[j]) && h.start_index[i] == h.stop_index[j];
    }
    CHECK_EQ(matched, 1);
  }
  pthread_mutex_destroy(&h.mu);
}

/* ---- pause, resume, wait_idle_for ---- */

static atomic_int ran;

static void count(void* arg) {
  (void)arg;
  atomic_fetch_add(&ran, 1);
}

static void test_pause(void) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 2;
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  atomic_store(&ran, 0);
  CHECK_EQ(spool_is_paused(pool), 0);
  CHECK_EQ(spool_pause(pool), SPOOL_OK);
  CHECK_EQ(spool_is_paused(pool), 1);
  for (int i = 0; i < 20; ++i) CHECK_EQ(spool_submit(pool, count, NULL), SPOOL_OK);
  CHECK_EQ(spool_wait_idle_for(pool, 10), SPOOL_ETIMEDOUT);
  CHECK_EQ(atomic_load(&ran), 0);
  CHECK_EQ(spool_resume(pool), SPOOL_OK);
  CHECK_EQ(spool_wait_idle_for(pool, -1), SPOOL_OK);
  CHECK_EQ(atomic_load(&ran), 20);
  CHECK_EQ(spool_wait_idle_for(pool, 0), SPOOL_OK);
  /* A paused pool is drained by spool_destroy. */
  CHECK_EQ(spool_pause(pool), SPOOL_OK);
  for (int i = 0; i < 5; ++i) CHECK_EQ(spool_submit(pool, count, NULL), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(atomic_load(&ran), 25);
  CHECK_EQ(spool_pause(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_resume(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_is_paused(NULL), SPOOL_EINVAL);
  CHECK_EQ(spool_wait_idle_for(NULL, 0), SPOOL_EINVAL);
}

/* ---- resize ---- */

static void test_resize(void) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 1;
  cfg.thread_capacity = 3;
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  CHECK_EQ(spool_resize(pool, 0, 1), SPOOL_EINVAL);
  CHECK_EQ(spool_resize(pool, 2, 1), SPOOL_EINVAL);
  CHECK_EQ(spool_resize(pool, 1, 4), SPOOL_EINVAL);
  CHECK_EQ(spool_resize(NULL, 1, 1), SPOOL_EINVAL);
  CHECK_EQ(spool_resize(pool, 3, 3), SPOOL_OK);
  spool_stats st;
  CHECK_EQ(spool_get_stats(pool, &st), SPOOL_OK);
  CHECK_EQ(st.threads_live, 3);
  atomic_store(&ran, 0);
  for (int i = 0; i < 50; ++i) CHECK_EQ(spool_submit(pool, count, NULL), SPOOL_OK);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(atomic_load(&ran), 50);
  CHECK_EQ(spool_shutdown(pool, SPOOL_SHUTDOWN_DRAIN, NULL), SPOOL_OK);
  CHECK_EQ(spool_resize(pool, 1, 1), SPOOL_ESHUTDOWN);
  CHECK_EQ(spool_pause(pool), SPOOL_ESHUTDOWN);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
}

/* ---- affinity ---- */

static atomic_int pinned_ok;
static atomic_int pinned_runs;
static unsigned pinned_cpu;

static void check_pinned(void* arg) {
  (void)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  int ok = pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0 && CPU_COUNT(&set) == 1 &&
           CPU_ISSET(pinned_cpu, &set) && sched_getcpu() == (int)pinned_cpu;
  atomic_fetch_add(&pinned_ok, ok);
  atomic_fetch_add(&pinned_runs, 1);
}

static void test_affinity(void) {
  unsigned cpus[CPU_SETSIZE];
  size_t n = spool_allowed_cpus(cpus, CPU_SETSIZE);
  CHECK(n >= 1);
  CHECK_EQ(spool_allowed_cpus(NULL, 0), n);
  pinned_cpu = cpus[n - 1];
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 2;
  cfg.affinity = &pinned_cpu; /* both workers on one CPU */
  cfg.affinity_count = 1;
  spool_pool* pool = NULL;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  for (int i = 0; i < 20; ++i) CHECK_EQ(spool_submit(pool, check_pinned, NULL), SPOOL_OK);
  CHECK_EQ(spool_destroy(pool), SPOOL_OK);
  CHECK_EQ(atomic_load(&pinned_runs), 20);
  CHECK_EQ(atomic_load(&pinned_ok), 20);

  unsigned bad = CPU_SETSIZE + 1;
  cfg.affinity = &bad;
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_EINVAL);
  CHECK(pool == NULL);
  cfg.affinity = NULL; /* a count without a list */
  CHECK_EQ(spool_create(&cfg, &pool), SPOOL_EINVAL);
}

/* ---- the process-wide pool ---- */

static void test_default_pool(void) {
  spool_pool* pool = spool_default_pool();
  CHECK(pool != NULL);
  CHECK(spool_default_pool() == pool);
  atomic_store(&ran, 0);
  for (int i = 0; i < 10; ++i) CHECK_EQ(spool_submit(pool, count, NULL), SPOOL_OK);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  CHECK_EQ(atomic_load(&ran), 10);
  spool_stats st;
  CHECK_EQ(spool_get_stats(pool, &st), SPOOL_OK);
  CHECK_EQ(st.threads_live, spool_allowed_cpus(NULL, 0));
  CHECK_EQ(spool_destroy(pool), SPOOL_EINVAL);
  CHECK_EQ(spool_shutdown(pool, SPOOL_SHUTDOWN_DRAIN, NULL), SPOOL_EINVAL);
  /* Every call that would end it is refused, spool_close included: it still runs. */
  CHECK_EQ(spool_close(pool), SPOOL_EINVAL);
  CHECK_EQ(spool_submit(pool, count, NULL), SPOOL_OK);
  CHECK_EQ(spool_wait_idle(pool), SPOOL_OK);
  /* Left running: the atexit handler drains and joins it. */
  CHECK_EQ(spool_submit(pool, count, NULL), SPOOL_OK);
}

int main(void) {
  check_watchdog(300);
  test_hooks();
  test_pause();
  test_resize();
  test_affinity();
  test_default_pool();
  return check_report("c_test_c_control");
}
