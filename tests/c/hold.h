/* hold.h: the C tests' shared helpers: a task that holds its worker until released (mutex +
 * condvar, no sleeps), for tests that need work provably running or provably queued, and a
 * thread body that shuts a pool down with SPOOL_SHUTDOWN_DISCARD while the test waits. */
#ifndef SPOOL_TESTS_C_HOLD_H
#define SPOOL_TESTS_C_HOLD_H

#include <spool/spool.h>

#include <pthread.h>
#include <stddef.h>

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started;
  int released;
} hold_t;

static inline void hold_init(hold_t* h) {
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  h->started = 0;
  h->released = 0;
}

static inline void hold_destroy(hold_t* h) {
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
}

/* A task that announces it started, then waits until the hold is released. */
static inline void hold_task(void* arg) {
  hold_t* h = arg;
  pthread_mutex_lock(&h->mu);
  ++h->started;
  pthread_cond_broadcast(&h->cv);
  while (!h->released) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
}

static inline void hold_wait_started(hold_t* h, int n) {
  pthread_mutex_lock(&h->mu);
  while (h->started < n) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
}

/* Holds a worker of pool: submits hold_task and waits until it has started, so that what is
 * submitted next (to a pool of one thread) stays queued until hold_release. Returns
 * spool_submit's code, and waits only if that is SPOOL_OK. */
static inline int hold_worker(spool_pool* pool, hold_t* h) {
  pthread_mutex_lock(&h->mu);
  int started = h->started;
  pthread_mutex_unlock(&h->mu);
  int rc = spool_submit(pool, hold_task, h);
  if (rc == SPOOL_OK) hold_wait_started(h, started + 1);
  return rc;
}

static inline void hold_release(hold_t* h) {
  pthread_mutex_lock(&h->mu);
  h->released = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

typedef struct {
  spool_pool* pool;
  size_t dropped;
  int rc;
} shutdown_arg;

/* pthread body: spool_shutdown(pool, DISCARD) into the shutdown_arg. */
static inline void* shutdown_discard_thread(void* arg) {
  shutdown_arg* a = (shutdown_arg*)arg;
  a->rc = spool_shutdown(a->pool, SPOOL_SHUTDOWN_DISCARD, &a->dropped);
  return NULL;
}

#endif /* SPOOL_TESTS_C_HOLD_H */
