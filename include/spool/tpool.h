/* tpool.h: a drop-in replacement for the tpool C library's API, implemented on libspool.
 * Build a tpool program unchanged with -I<prefix>/include/spool and link with -lspool.
 *
 * Differences from tpool's own implementation (all deliberate):
 *  - tpool_add called from inside a job never blocks: the job goes to the calling worker's
 *    own deque, outside the buffer's bound, so recursive submission cannot deadlock.
 *  - tpool_add returns non-zero (a SPOOL_E* code) for a NULL pool or function and after
 *    tpool_shutdown; it never drops a job silently.
 *  - tpool_wait blocks until no job is queued or running; called from inside a job it returns
 *    at once instead of waiting for itself.
 *  - tpool_shutdown returns at once; queued jobs still run, and jobs that running jobs add are
 *    still accepted so they can finish. tpool_destroy drains, joins and frees; called from
 *    inside a job it returns non-zero and frees nothing.
 *  - tpool_create returns NULL for thread_count < 1 or buffer_size < 1, or if threads cannot
 *    be started.
 */
#ifndef tpool_h
#define tpool_h

#ifdef __cplusplus
extern "C" {
#endif

/* The original tpool.h's tag, kept for code that names the struct. */
typedef struct _tpool tpool; /* NOLINT(bugprone-reserved-identifier) */

tpool* tpool_create(int thread_count, int buffer_size);
int tpool_add(tpool* tp, void (*func)(void*), void* arg);
void tpool_wait(tpool* tp);
int tpool_shutdown(tpool* tp);
int tpool_destroy(tpool* tp);
int tpool_count_working_threads(tpool* tp);

#ifdef __cplusplus
}
#endif

#endif /* tpool_h */
