/* Install test, step 5: a program that is not linked with libspool loads it with dlopen() and
 * runs tasks on it. libspool.so keeps its per-thread state in the initial-exec TLS model (see
 * src/README.md, "Thread-local storage"), which a library loaded after start-up may use only
 * while the C library's reserve of static TLS has room; this shows that it loads and that its
 * thread-local state works on the threads it starts and on the thread that was running before
 * it was loaded (this one, which submits every task and so takes a producer slot and a ring).
 *
 *   dlopen_consumer PATH-TO-libspool.so.0
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "spool/spool.h"

enum { k_tasks = 100000 };

static atomic_long ran;

static void count(void* arg) {
  (void)arg;
  atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
}

static void* must(void* lib, const char* name) {
  void* sym = dlsym(lib, name);
  if (sym == NULL) {
    fprintf(stderr, "dlopen_consumer: %s not found: %s\n", name, dlerror());
    exit(1);
  }
  return sym;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: dlopen_consumer PATH-TO-libspool.so.0\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen_consumer: dlopen failed: %s\n", dlerror());
    return 1;
  }
  /* POSIX lets a void* from dlsym be converted to a function pointer; ISO C does not say. */
  void (*config_init)(spool_config*);
  int (*create)(const spool_config*, spool_pool**);
  int (*submit)(spool_pool*, void (*)(void*), void*);
  int (*wait_idle)(spool_pool*);
  int (*destroy)(spool_pool*);
  *(void**)&config_init = must(lib, "spool_config_init");
  *(void**)&create = must(lib, "spool_create");
  *(void**)&submit = must(lib, "spool_submit");
  *(void**)&wait_idle = must(lib, "spool_wait_idle");
  *(void**)&destroy = must(lib, "spool_destroy");

  spool_config cfg;
  config_init(&cfg);
  cfg.threads = 2;
  spool_pool* pool = NULL;
  int rc = create(&cfg, &pool);
  if (rc != SPOOL_OK) {
    fprintf(stderr, "dlopen_consumer: spool_create returned %d\n", rc);
    return 1;
  }
  for (long i = 0; i < k_tasks; ++i) {
    rc = submit(pool, count, NULL);
    if (rc != SPOOL_OK) {
      fprintf(stderr, "dlopen_consumer: spool_submit returned %d at task %ld\n", rc, i);
      return 1;
    }
  }
  if ((rc = wait_idle(pool)) != SPOOL_OK || (rc = destroy(pool)) != SPOOL_OK) {
    fprintf(stderr, "dlopen_consumer: wait_idle/destroy returned %d\n", rc);
    return 1;
  }
  long n = atomic_load(&ran);
  if (n != k_tasks) {
    fprintf(stderr, "dlopen_consumer: %ld of %d tasks ran\n", n, (int)k_tasks);
    return 1;
  }
  printf("dlopen_consumer: %ld tasks ran on a dlopen()ed libspool\n", n);
  return 0;
}
