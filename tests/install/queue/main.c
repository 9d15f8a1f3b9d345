/* The installed C API of libspool_queue, from C. */
#include <spool/queue.h>
#include <stdio.h>

int main(void) {
  spool_queue_producer* p = NULL;
  if (spool_queue_producer_create("redis://", NULL, &p) != SPOOL_QUEUE_EINVAL) return 1;
  if (spool_queue_producer_create("redis://127.0.0.1:1", NULL, &p) != SPOOL_QUEUE_OK) return 1;
  char id[SPOOL_QUEUE_ID_MAX];
  const int rc = spool_queue_submit(p, "q", "t", "x", 1, NULL, id, sizeof id);
  spool_queue_producer_destroy(p);
  if (rc != SPOOL_QUEUE_EUNAVAILABLE) {
    fprintf(stderr, "queue C consumer: %s\n", spool_queue_strerror(rc));
    return 1;
  }
  puts("queue C consumer: ok");
  return 0;
}
