// api/tpool.cpp: tpool's six functions (tpool.h) on the C API. Differences from tpool's own code
// are listed in tpool.h.
#include "spool/tpool.h"

#include <new>

#include "spool/spool.h"

struct _tpool {
  spool_pool* pool;
};

extern "C" {

tpool* tpool_create(int thread_count, int buffer_size) {
  if (thread_count < 1 || buffer_size < 1) return nullptr;
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = static_cast<unsigned>(thread_count);
  cfg.queue_capacity = static_cast<size_t>(buffer_size);
  cfg.on_full = SPOOL_FULL_BLOCK;
  cfg.name = "tpool";
  auto* tp = new (std::nothrow) _tpool{nullptr};
  if (tp == nullptr) return nullptr;
  if (spool_create(&cfg, &tp->pool) != SPOOL_OK) {
    delete tp;
    return nullptr;
  }
  return tp;
}

int tpool_add(tpool* tp, void (*func)(void*), void* arg) {
  if (tp == nullptr) return SPOOL_EINVAL;
  return spool_submit(tp->pool, func, arg);
}

void tpool_wait(tpool* tp) {
  // From inside a job this returns SPOOL_EDEADLK at once; tpool_wait has no way to say so.
  if (tp != nullptr) spool_wait_idle(tp->pool);
}

int tpool_shutdown(tpool* tp) {
  if (tp == nullptr) return SPOOL_EINVAL;
  return spool_close(tp->pool);
}

int tpool_destroy(tpool* tp) {
  if (tp == nullptr) return SPOOL_EINVAL;
  if (int rc = spool_destroy(tp->pool); rc != SPOOL_OK) return rc;
  delete tp;
  return 0;
}

int tpool_count_working_threads(tpool* tp) {
  if (tp == nullptr) return -1;
  spool_stats s;
  spool_get_stats(tp->pool, &s);
  return static_cast<int>(s.threads_busy);
}

}  // extern "C"
