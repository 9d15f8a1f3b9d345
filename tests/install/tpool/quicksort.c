/* A program written for the tpool C library, unchanged: it includes "tpool.h" and uses only
 * tpool's six functions. Built against an installed spool with
 *   cc -I<prefix>/include/spool quicksort.c -L<libdir> -lspool
 * it must compile, and it must finish: every partition adds its two halves as jobs from inside
 * a job, with no depth limit and a buffer of 50, which deadlocked tpool itself. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "tpool.h"

typedef struct {
  tpool* tp;
  int* a;
  long lo, hi; /* inclusive */
} job;

static void quicksort(void* p);

static void add_half(tpool* tp, int* a, long lo, long hi) {
  if (lo >= hi) return;
  job* j = malloc(sizeof *j);
  if (j == NULL) abort();
  j->tp = tp;
  j->a = a;
  j->lo = lo;
  j->hi = hi;
  if (tpool_add(tp, quicksort, j) != 0) {
    fprintf(stderr, "tpool_add failed\n");
    abort();
  }
}

static void quicksort(void* p) {
  job* j = p;
  int* a = j->a;
  long lo = j->lo, hi = j->hi, mid = lo + (hi - lo) / 2;
  int pivot = a[mid];
  long i = lo, k = hi;
  while (i <= k) {
    while (a[i] < pivot) i++;
    while (a[k] > pivot) k--;
    if (i <= k) {
      int t = a[i];
      a[i] = a[k];
      a[k] = t;
      i++;
      k--;
    }
  }
  add_half(j->tp, a, lo, k);
  add_half(j->tp, a, i, hi);
  free(j);
}

int main(void) {
  const long n = 1000000;
  int* a = malloc((size_t)n * sizeof *a);
  if (a == NULL) return 1;
  for (long i = 0; i < n; i++) a[i] = (int)(n - i);
  tpool* tp = tpool_create(6, 50);
  if (tp == NULL) return 1;
  add_half(tp, a, 0, n - 1);
  tpool_wait(tp);
  if (tpool_shutdown(tp) != 0 || tpool_destroy(tp) != 0) return 1;
  for (long i = 1; i < n; i++) {
    if (a[i - 1] > a[i]) {
      fprintf(stderr, "not sorted at %ld\n", i);
      return 1;
    }
  }
  printf("tpool program: sorted %ld ints through the tpool API on spool\n", n);
  free(a);
  return 0;
}
