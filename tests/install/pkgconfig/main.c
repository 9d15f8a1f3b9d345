/* Installed-package smoke test for the C API, built with
 *   cc main.c $(pkg-config --cflags --libs spool)           (shared)
 *   cc main.c $(pkg-config --cflags --static --libs spool)  (static)
 */
#include <spool/spool.h>

#include <stdatomic.h>
#include <stdio.h>

static void bump(void* arg) {
  atomic_fetch_add_explicit((atomic_int*)arg, 1, memory_order_relaxed);
}

int main(void) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 2;

  spool_pool* p = NULL;
  if (spool_create(&cfg, &p) != SPOOL_OK) {
    fprintf(stderr, "pkg-config consumer: spool_create failed\n");
    return 1;
  }

  atomic_int counter;
  atomic_init(&counter, 0);
  for (int i = 0; i < 100; ++i) {
    if (spool_submit(p, bump, &counter) != SPOOL_OK) {
      fprintf(stderr, "pkg-config consumer: spool_submit failed at %d\n", i);
      spool_destroy(p);
      return 1;
    }
  }
  if (spool_wait_idle(p) != SPOOL_OK) {
    fprintf(stderr, "pkg-config consumer: spool_wait_idle failed\n");
    spool_destroy(p);
    return 1;
  }

  const int n = atomic_load(&counter);
  spool_destroy(p);
  if (n != 100) {
    fprintf(stderr, "pkg-config consumer: expected counter == 100, got %d\n", n);
    return 1;
  }
  printf("pkg-config consumer: OK (counter == %d)\n", n);
  return 0;
}
