// c_api.cpp: the C API (spool.h) over detail::core.
#include <chrono>
#include <cstring>
#include <new>

#include "core.hpp"
#include "spool/spool.h"

struct spool_pool {
  explicit spool_pool(const spool::config& cfg) : core(cfg) {}
  spool::detail::core core;
};

namespace {

using spool::detail::core;
using spool::detail::task;

// A C function and its argument. on_cancel, if set, hands arg back when the task is dropped.
class c_task final : public task {
 public:
  c_task(void (*fn)(void*), void* arg, void (*on_cancel)(void*)) noexcept
      : fn_(fn), arg_(arg), on_cancel_(on_cancel) {}

  bool run(core&) noexcept override {
    auto fn = fn_;
    void* arg = arg_;
    delete this;
    fn(arg);
    return true;
  }
  void cancel() noexcept override {
    auto hook = on_cancel_;
    void* arg = arg_;
    delete this;
    if (hook != nullptr) hook(arg);
  }
  void destroy() noexcept override { delete this; }

 private:
  void (*fn_)(void*);
  void* arg_;
  void (*on_cancel_)(void*);
};

int to_c(std::error_code ec) noexcept { return ec ? ec.value() : SPOOL_OK; }

spool::config to_cpp(const spool_config& c) {
  spool::config cfg;
  cfg.threads = c.threads;
  cfg.queue_capacity = c.queue_capacity;
  cfg.on_full = static_cast<spool::full_policy>(c.on_full);
  cfg.block_timeout = std::chrono::milliseconds(c.block_timeout_ms);
  if (c.name != nullptr) cfg.name = c.name;
  cfg.spin_rounds = c.spin_rounds;
  return cfg;
}

}  // namespace

extern "C" {

void spool_config_init(spool_config* cfg) {
  if (cfg == nullptr) return;
  const spool::config defaults;
  cfg->threads = defaults.threads;
  cfg->queue_capacity = defaults.queue_capacity;
  cfg->on_full = SPOOL_FULL_BLOCK;
  cfg->block_timeout_ms = static_cast<unsigned>(
      std::chrono::duration_cast<std::chrono::milliseconds>(defaults.block_timeout).count());
  cfg->name = nullptr;
  cfg->spin_rounds = defaults.spin_rounds;
}

int spool_create(const spool_config* cfg, spool_pool** out) {
  if (out == nullptr) return SPOOL_EINVAL;
  *out = nullptr;
  spool_config c;
  spool_config_init(&c);
  if (cfg != nullptr) c = *cfg;
  // A C caller can store any int in the enum; loading an out-of-range enumerator in C++ is
  // undefined, so inspect the bytes as an int.
  static_assert(sizeof(spool_full_policy) == sizeof(int));
  int policy;
  std::memcpy(&policy, &c.on_full, sizeof policy);
  if (policy < SPOOL_FULL_BLOCK || policy > SPOOL_FULL_DISCARD_OLDEST) return SPOOL_EINVAL;
  try {
    *out = new spool_pool(to_cpp(c));
  } catch (const spool::error& e) {
    return e.code().value();
  } catch (const std::bad_alloc&) {
    return SPOOL_ENOMEM;
  } catch (...) {
    return SPOOL_ESYSTEM;
  }
  return SPOOL_OK;
}

int spool_submit_ex(spool_pool* pool, void (*fn)(void*), void* arg, void (*on_cancel)(void*)) {
  if (pool == nullptr || fn == nullptr) return SPOOL_EINVAL;
  auto* t = new (std::nothrow) c_task(fn, arg, on_cancel);
  if (t == nullptr) return SPOOL_ENOMEM;
  return to_c(pool->core.submit(t));
}

int spool_submit(spool_pool* pool, void (*fn)(void*), void* arg) {
  return spool_submit_ex(pool, fn, arg, nullptr);
}

int spool_wait_idle(spool_pool* pool) {
  if (pool == nullptr) return SPOOL_EINVAL;
  return to_c(pool->core.wait_idle());
}

int spool_close(spool_pool* pool) {
  if (pool == nullptr) return SPOOL_EINVAL;
  pool->core.close();
  return SPOOL_OK;
}

int spool_shutdown(spool_pool* pool, spool_shutdown_mode mode, size_t* dropped) {
  if (pool == nullptr) return SPOOL_EINVAL;
  static_assert(sizeof(spool_shutdown_mode) == sizeof(int));
  int m;
  std::memcpy(&m, &mode, sizeof m);
  if (m != SPOOL_SHUTDOWN_DRAIN && m != SPOOL_SHUTDOWN_DISCARD) return SPOOL_EINVAL;
  return to_c(pool->core.shutdown(static_cast<spool::shutdown_mode>(mode), dropped));
}

int spool_destroy(spool_pool* pool) {
  if (pool == nullptr) return SPOOL_EINVAL;
  if (int rc = to_c(pool->core.shutdown(spool::shutdown_mode::drain, nullptr)); rc != SPOOL_OK) {
    return rc;
  }
  delete pool;
  return SPOOL_OK;
}

int spool_get_stats(const spool_pool* pool, spool_stats* out) {
  if (pool == nullptr || out == nullptr) return SPOOL_EINVAL;
  const spool::stats s = pool->core.snapshot();
  out->threads_live = s.threads_live;
  out->threads_busy = s.threads_busy;
  out->queued = s.queued;
  out->submitted = s.submitted;
  out->completed = s.completed;
  out->failed = s.failed;
  out->rejected = s.rejected;
  out->stolen = s.stolen;
  out->cancelled = s.cancelled;
  return SPOOL_OK;
}

int spool_worker_index(void) { return spool::this_worker_index(); }

}  // extern "C"
