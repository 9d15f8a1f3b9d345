/* The tpool drop-in (tpool.h) from a C11 program written the way tpool's users write them:
 * tpool's own cases, its recursive quicksort without a depth limit, and the documented
 * differences (create's argument checks, add after shutdown, calls from inside a job).
 * Returns 0 if every check passed; otherwise prints each failed check and returns 1. */
#define _POSIX_C_SOURCE 200809L

#include "tpool.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* A counter guarded by a mutex, as tpool's examples keep one. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int value;
  int started; /* jobs that reached the gate */
  int open;    /* the gate: held jobs wait until it is set */
} counter_t;

static void counter_init(counter_t* c) {
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  c->value = 0;
  c->started = 0;
  c->open = 0;
}

static void counter_destroy(counter_t* c) {
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
}

static int counter_value(counter_t* c) {
  pthread_mutex_lock(&c->mu);
  int v = c->value;
  pthread_mutex_unlock(&c->mu);
  return v;
}

static void increment(void* arg) {
  counter_t* c = arg;
  pthread_mutex_lock(&c->mu);
  ++c->value;
  pthread_mutex_unlock(&c->mu);
}

/* Counts itself, announces it started, then waits until the gate opens. */
static void increment_and_hold(void* arg) {
  counter_t* c = arg;
  pthread_mutex_lock(&c->mu);
  ++c->value;
  ++c->started;
  pthread_cond_broadcast(&c->cv);
  while (!c->open) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
}

static void wait_started(counter_t* c, int n) {
  pthread_mutex_lock(&c->mu);
  while (c->started < n) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
}

static void open_gate(counter_t* c) {
  pthread_mutex_lock(&c->mu);
  c->open = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* tpool's first case: 1000 increments give 1000. */
static void test_thousand_increments(void) {
  counter_t c;
  counter_init(&c);
  tpool* tp = tpool_create(4, 16);
  CHECK(tp != NULL);
  if (tp == NULL) return;
  for (int i = 0; i < 1000; ++i) CHECK_EQ(tpool_add(tp, increment, &c), 0);
  tpool_wait(tp);
  CHECK_EQ(counter_value(&c), 1000);
  CHECK_EQ(tpool_destroy(tp), 0);
  counter_destroy(&c);
}

/* A graceful tpool_shutdown after 500 adds: all 500 still run (the two workers are held while
 * the rest wait in the buffer, so they really are queued at shutdown), and a later tpool_add is
 * refused without running its job. */
static void test_graceful_shutdown_after_500(void) {
  counter_t c, refused;
  counter_init(&c);
  counter_init(&refused);
  tpool* tp = tpool_create(2, 500);
  CHECK(tp != NULL);
  if (tp == NULL) return;
  CHECK_EQ(tpool_add(tp, increment_and_hold, &c), 0);
  CHECK_EQ(tpool_add(tp, increment_and_hold, &c), 0);
  wait_started(&c, 2);
  for (int i = 0; i < 498; ++i) CHECK_EQ(tpool_add(tp, increment, &c), 0);
  CHECK_EQ(tpool_shutdown(tp), 0);
  CHECK(tpool_add(tp, increment, &refused) != 0);
  open_gate(&c);
  CHECK_EQ(tpool_destroy(tp), 0);
  CHECK_EQ(c.value, 500);
  CHECK_EQ(refused.value, 0);
  counter_destroy(&c);
  counter_destroy(&refused);
}

/* tpool_count_working_threads is exactly the number of jobs held, and 0 once they finish. */
static void test_count_working_threads(void) {
  tpool* tp = tpool_create(4, 8);
  CHECK(tp != NULL);
  if (tp == NULL) return;
  CHECK_EQ(tpool_count_working_threads(tp), 0);
  for (int held = 1; held <= 3; ++held) {
    counter_t c;
    counter_init(&c);
    for (int i = 0; i < held; ++i) CHECK_EQ(tpool_add(tp, increment_and_hold, &c), 0);
    wait_started(&c, held);
    CHECK_EQ(tpool_count_working_threads(tp), held);
    open_gate(&c);
    tpool_wait(tp);
    CHECK_EQ(tpool_count_working_threads(tp), 0);
    counter_destroy(&c);
  }
  CHECK_EQ(tpool_destroy(tp), 0);
}

/* ---- tpool's recursive quicksort (its README's deadlocking case), with no depth limit ---- */

enum { sort_size = 1000000, sort_cutoff = 1000 };

typedef struct {
  tpool* tp;
  int* a;
  long lo, hi; /* inclusive */
  int* add_failed;
} sort_job;

static int compare_ints(const void* x, const void* y) {
  int a = *(const int*)x, b = *(const int*)y;
  return (a > b) - (a < b);
}

static void quicksort_job(void* arg);

static void add_sort_job(const sort_job* parent, long lo, long hi) {
  sort_job* job = malloc(sizeof *job);
  if (job == NULL) abort();
  *job = *parent;
  job->lo = lo;
  job->hi = hi;
  if (tpool_add(parent->tp, quicksort_job, job) != 0) {
    *parent->add_failed = 1; /* written only on failure; read after tpool_wait */
    free(job);
  }
}

/* Partitions around the middle element (Hoare) and adds both halves as jobs. */
static void quicksort_job(void* arg) {
  sort_job* job = arg;
  int* a = job->a;
  long lo = job->lo, hi = job->hi;
  if (hi - lo + 1 <= sort_cutoff) {
    qsort(a + lo, (size_t)(hi - lo + 1), sizeof *a, compare_ints);
    free(job);
    return;
  }
  int pivot = a[lo + (hi - lo) / 2];
  long i = lo, j = hi;
  while (i <= j) {
    while (a[i] < pivot) ++i;
    while (a[j] > pivot) --j;
    if (i <= j) {
      int t = a[i];
      a[i] = a[j];
      a[j] = t;
      ++i;
      --j;
    }
  }
  if (lo < j) add_sort_job(job, lo, j);
  if (i < hi) add_sort_job(job, i, hi);
  free(job);
}

static void test_recursive_quicksort(int threads, int buffer) {
  int* a = malloc(sort_size * sizeof *a);
  if (a == NULL) abort();
  for (long i = 0; i < sort_size; ++i) a[i] = (int)(sort_size - i);
  int add_failed = 0;
  tpool* tp = tpool_create(threads, buffer);
  CHECK(tp != NULL);
  if (tp == NULL) {
    free(a);
    return;
  }
  sort_job root = {tp, a, 0, sort_size - 1, &add_failed};
  add_sort_job(&root, 0, sort_size - 1);
  tpool_wait(tp);
  CHECK_EQ(add_failed, 0);
  long misplaced = 0;
  for (long i = 0; i < sort_size; ++i) misplaced += a[i] != i + 1;
  if (misplaced != 0) fprintf(stderr, "quicksort(%d, %d): not sorted\n", threads, buffer);
  CHECK_EQ(misplaced, 0);
  CHECK_EQ(tpool_destroy(tp), 0);
  free(a);
}

/* ---- the documented differences ---- */

static void noop(void* arg) { (void)arg; }

/* tpool_create refuses thread_count < 1 and buffer_size < 1; tpool_add refuses NULLs. */
static void test_argument_checks(void) {
  CHECK(tpool_create(0, 10) == NULL);
  CHECK(tpool_create(-1, 10) == NULL);
  CHECK(tpool_create(2, 0) == NULL);
  CHECK(tpool_create(2, -5) == NULL);
  CHECK(tpool_add(NULL, noop, NULL) != 0);
  tpool* tp = tpool_create(1, 1);
  CHECK(tp != NULL);
  if (tp == NULL) return;
  CHECK(tpool_add(tp, NULL, NULL) != 0);
  CHECK_EQ(tpool_destroy(tp), 0);
}

typedef struct {
  tpool* tp;
  counter_t* children;
  int destroy_rc;
  int shutdown_rc;
  int add_failures;
} inside_job;

/* Inside a job: tpool_wait returns at once, tpool_destroy refuses, and tpool_add still works
 * after tpool_shutdown (so running jobs can finish their work). */
static void calls_from_inside(void* arg) {
  inside_job* job = arg;
  tpool_wait(job->tp);
  job->destroy_rc = tpool_destroy(job->tp);
  job->shutdown_rc = tpool_shutdown(job->tp);
  for (int i = 0; i < 10; ++i) {
    if (tpool_add(job->tp, increment, job->children) != 0) ++job->add_failures;
  }
}

static void test_calls_from_inside_a_job(void) {
  counter_t children;
  counter_init(&children);
  tpool* tp = tpool_create(2, 1);
  CHECK(tp != NULL);
  if (tp == NULL) return;
  inside_job job = {tp, &children, 0, -1, 0};
  CHECK_EQ(tpool_add(tp, calls_from_inside, &job), 0);
  tpool_wait(tp);
  CHECK(job.destroy_rc != 0);
  CHECK_EQ(job.shutdown_rc, 0);
  CHECK_EQ(job.add_failures, 0);
  CHECK_EQ(counter_value(&children), 10);
  CHECK(tpool_add(tp, noop, NULL) != 0); /* shut down for outside callers */
  CHECK_EQ(tpool_destroy(tp), 0);
  counter_destroy(&children);
}

int main(void) {
  check_watchdog(120);
  test_thousand_increments();
  test_graceful_shutdown_after_500();
  test_count_working_threads();
  test_recursive_quicksort(1, 2);
  test_recursive_quicksort(4, 2);
  test_argument_checks();
  test_calls_from_inside_a_job();
  if (check_report("test_tpool") != 0) return 1;
  printf("test_tpool: all checks passed\n");
  return 0;
}
