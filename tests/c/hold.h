/* hold.h: a task that holds its worker until released (mutex + condvar, no sleeps), for the C
 * tests that need work provably running or provably queued. */
#ifndef SPOOL_TESTS_C_HOLD_H
#define SPOOL_TESTS_C_HOLD_H

#include <pthread.h>

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started;
  int released;
} hold_t;

static inline void hold_init(hold_t *h) {
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  h->started = 0;
  h->released = 0;
}

static inline void hold_destroy(hold_t *h) {
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
}

/* A task that announces it started, then waits until the hold is released. */
static inline void hold_task(void *arg) {
  hold_t *h = arg;
  pthread_mutex_lock(&h->mu);
  ++h->started;
  pthread_cond_broadcast(&h->cv);
  while (!h->released) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
}

static inline void hold_wait_started(hold_t *h, int n) {
  pthread_mutex_lock(&h->mu);
  while (h->started < n) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
}

static inline void hold_release(hold_t *h) {
  pthread_mutex_lock(&h->mu);
  h->released = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

#endif /* SPOOL_TESTS_C_HOLD_H */
