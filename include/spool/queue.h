/* spool/queue.h: the C API of libspool_queue, a durable task queue on Redis Streams whose
 * workers run jobs on spool pools (the C++ API, spool/queue.hpp, says more of each call).
 *
 *   spool_queue_producer *p;
 *   spool_queue_producer_create("redis://127.0.0.1:6379", NULL, &p);
 *   char id[SPOOL_QUEUE_ID_MAX];
 *   spool_queue_submit(p, "mail", "send", data, len, NULL, id, sizeof id);
 *   spool_queue_result r;
 *   if (spool_queue_get(p, id, 5000, &r) == SPOOL_QUEUE_OK) { use r.data, r.size; }
 *   spool_queue_result_free(&r);
 *   spool_queue_producer_destroy(p);
 *
 *   spool_queue_worker *w;
 *   spool_queue_worker_create("redis://127.0.0.1:6379", "mail", 4, &w);
 *   spool_queue_worker_handle(w, "send", send_handler, NULL);
 *   spool_queue_worker_start(w);
 *   ...
 *   spool_queue_worker_stop(w);      (stop claiming, finish or hand back, return)
 *   spool_queue_worker_destroy(w);
 *
 * Every function returns SPOOL_QUEUE_OK (0) or one of the codes below; the calling thread's
 * spool_queue_last_error() then says what happened in words.
 */
#ifndef SPOOL_QUEUE_H
#define SPOOL_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The same values as spool::queue::errc. */
enum {
  SPOOL_QUEUE_OK = 0,
  SPOOL_QUEUE_EUNAVAILABLE = 1, /* Redis unreachable, read-only, no primary: nothing done */
  SPOOL_QUEUE_EUNKNOWN = 2,     /* sent, reply lost: maybe done (retry with the same key) */
  SPOOL_QUEUE_EFULL = 3,        /* the queue is at its maximum length */
  SPOOL_QUEUE_ETIMEDOUT = 4,    /* no room (block_for), or no outcome within the timeout */
  SPOOL_QUEUE_EINVAL = 5,       /* a null pointer, malformed URL/name/id, option out of range */
  SPOOL_QUEUE_ENOTFOUND = 6,    /* no such job */
  SPOOL_QUEUE_ETOOBIG = 7,      /* payload or result above the limit */
  SPOOL_QUEUE_ESTATE = 8,       /* the job's state does not allow it */
  SPOOL_QUEUE_EREDIS = 9,       /* Redis answered an unexpected error */
  SPOOL_QUEUE_ESHUTDOWN = 10,   /* stopped */
  SPOOL_QUEUE_EORDER = 11,      /* a call out of order (handle after start) */
  SPOOL_QUEUE_EFAILED = 12,     /* spool_queue_get: the job is dead (result.data: its error) */
  SPOOL_QUEUE_ECANCELED = 13,   /* spool_queue_get: the job was cancelled */
  SPOOL_QUEUE_ENOMEM = 14,      /* out of memory */
  SPOOL_QUEUE_EVERSION = 15     /* Redis holds another spool build's queue functions: stop that
                                   build's processes, then spool-queue --replace-functions */
};

/* The longest job id, "QUEUE/N", with its terminating NUL. */
#define SPOOL_QUEUE_ID_MAX 256

typedef struct spool_queue_producer spool_queue_producer;
typedef struct spool_queue_worker spool_queue_worker;

/* A job's options (spool::queue::job_options); spool_queue_submit_options_init sets the
 * defaults. */
typedef struct spool_queue_submit_options {
  const char* key;         /* deduplication key, NUL-terminated; NULL or "" = none */
  int priority;            /* 0 low, 1 normal (default), 2 high */
  uint64_t delay_ms;       /* run no earlier than this from now */
  unsigned attempts;       /* runs that may fail: 1 .. 1000 (default 1) */
  uint64_t backoff_ms;     /* before the 2nd attempt, doubling (default 1000) */
  uint64_t backoff_max_ms; /* (default 3600000) */
  uint64_t time_limit_ms;  /* per attempt; 0 = none */
  uint64_t result_ttl_s;   /* how long the outcome is kept; 0 = until deleted (default 86400) */
} spool_queue_submit_options;

void spool_queue_submit_options_init(spool_queue_submit_options* options);

/* A job's outcome, filled by spool_queue_get: the result's bytes (done) or the error's
 * (SPOOL_QUEUE_EFAILED). data is NUL-terminated (size excludes the NUL); free it with
 * spool_queue_result_free. */
typedef struct spool_queue_result {
  char* data;
  size_t size;
} spool_queue_result;

void spool_queue_result_free(spool_queue_result* result);

/* The producer. replicas (NULL: 0): a submission is acknowledged once that many replicas have
 * it (0 = the primary alone). */
int spool_queue_producer_create(const char* store_url, const unsigned* replicas,
                                spool_queue_producer** out);
void spool_queue_producer_destroy(spool_queue_producer* producer);

/* Submits one job; writes its id ("QUEUE/N", NUL-terminated) to job_id (SPOOL_QUEUE_EINVAL if
 * id_capacity is too small: the job is submitted all the same, and its id lost). options may be
 * NULL (the defaults). */
int spool_queue_submit(spool_queue_producer* producer, const char* queue, const char* task,
                       const void* payload, size_t payload_size,
                       const spool_queue_submit_options* options, char* job_id, size_t id_capacity);
/* Waits up to timeout_ms (-1: no limit) for the job's outcome. SPOOL_QUEUE_OK with the result,
 * SPOOL_QUEUE_EFAILED with the error in result, SPOOL_QUEUE_ECANCELED, SPOOL_QUEUE_ETIMEDOUT,
 * SPOOL_QUEUE_ENOTFOUND. result is untouched unless OK or EFAILED. */
int spool_queue_get(spool_queue_producer* producer, const char* job_id, int64_t timeout_ms,
                    spool_queue_result* result);
/* Cancels a job (queued: it never starts; running: its token fires, it is not retried).
 * SPOOL_QUEUE_ESTATE if it has ended. */
int spool_queue_cancel(spool_queue_producer* producer, const char* job_id);

/* What a handler sees (valid during the call). */
typedef struct spool_queue_job {
  const char* queue;
  const char* id;
  const char* task;
  const char* key; /* "" if none */
  uint64_t attempt;
  const void* internal; /* for spool_queue_job_cancelled */
} spool_queue_job;

/* Whether the attempt should stop (cancelled, lease lost, time limit, the worker stopping). */
int spool_queue_job_cancelled(const spool_queue_job* job);

/* Where a handler puts its result, or its error message: spool_queue_reply copies the bytes. */
typedef struct spool_queue_reply spool_queue_reply;
int spool_queue_reply_set(spool_queue_reply* reply, const void* data, size_t size);

/* A handler: returns 0 with the result in reply, or non-zero for a failed attempt with the
 * error message in reply. Runs on a pool worker; must not longjmp out. */
typedef int (*spool_queue_handler)(const spool_queue_job* job, const void* payload,
                                   size_t payload_size, spool_queue_reply* reply, void* arg);

/* A worker of `queue` with a pool of `threads` threads (0 = one per CPU) and the C++ API's
 * defaults otherwise (lease 30 s). */
int spool_queue_worker_create(const char* store_url, const char* queue, unsigned threads,
                              spool_queue_worker** out);
/* Before start (SPOOL_QUEUE_EORDER after). arg is passed to every call. */
int spool_queue_worker_handle(spool_queue_worker* worker, const char* task,
                              spool_queue_handler handler, void* arg);
int spool_queue_worker_start(spool_queue_worker* worker);
/* Stop claiming, finish (up to the drain timeout) or hand back, return. */
int spool_queue_worker_stop(spool_queue_worker* worker);
void spool_queue_worker_destroy(spool_queue_worker* worker);

const char* spool_queue_strerror(int code);
/* The last error of the calling thread's last failed call, in words ("" if none). */
const char* spool_queue_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* SPOOL_QUEUE_H */
