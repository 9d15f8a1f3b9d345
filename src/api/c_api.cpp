// api/c_api.cpp: the C API (spool.h) over detail::core.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "api/c_task.hpp"
#include "api/default_pool.hpp"
#include "core.hpp"
#include "lifetime/lifetime.hpp"
#include "spool/spool.h"

namespace {

using spool::detail::c_task;
using spool::detail::core;
using spool::detail::to_c;

spool::config to_cpp(const spool_config& c) {
  spool::config cfg;
  cfg.threads = c.threads;
  cfg.queue_capacity = c.queue_capacity;
  cfg.on_full = static_cast<spool::full_policy>(c.on_full);
  cfg.block_timeout = std::chrono::milliseconds(c.block_timeout_ms);
  if (c.name != nullptr) cfg.name = c.name;
  cfg.spin_rounds = c.spin_rounds;
  cfg.min_threads = c.min_threads;
  cfg.max_threads = c.max_threads;
  cfg.keep_alive = std::chrono::milliseconds(c.keep_alive_ms);
  cfg.monitor_min_interval = std::chrono::microseconds(c.monitor_min_interval_us);
  cfg.monitor_max_interval = std::chrono::microseconds(c.monitor_max_interval_us);
  cfg.aging = std::chrono::milliseconds(c.aging_ms);
  cfg.defer_period = std::chrono::microseconds(c.defer_period_us);
  if (c.on_scale != nullptr) {
    cfg.on_scale = [fn = c.on_scale, arg = c.on_scale_arg](const spool::scale_event& e) {
      spool_scale_event ce;
      ce.what = static_cast<spool_scale_kind>(e.what);
      ce.why = static_cast<spool_scale_cause>(e.why);
      ce.worker_index = e.worker_index;
      ce.threads_live = e.threads_live;
      fn(&ce, arg);
    };
  }
  if (c.on_worker_start != nullptr) {
    cfg.on_worker_start = [fn = c.on_worker_start, arg = c.worker_hook_arg](unsigned i) {
      fn(i, arg);
    };
  }
  if (c.on_worker_stop != nullptr) {
    cfg.on_worker_stop = [fn = c.on_worker_stop, arg = c.worker_hook_arg](unsigned i) {
      fn(i, arg);
    };
  }
  if (c.affinity_count != 0) cfg.affinity.assign(c.affinity, c.affinity + c.affinity_count);
  if (c.on_task_start != nullptr) {
    cfg.on_task_start = [fn = c.on_task_start, arg = c.task_hook_arg](const spool::task_info& t) {
      const spool_task_info info{t.name, t.worker_index};
      fn(&info, arg);
    };
  }
  if (c.on_task_finish != nullptr) {
    cfg.on_task_finish = [fn = c.on_task_finish, arg = c.task_hook_arg](const spool::task_info& t,
                                                                        spool::task_end end) {
      const spool_task_info info{t.name, t.worker_index};
      fn(&info, static_cast<spool_task_end>(end), arg);
    };
  }
  cfg.thread_capacity = c.thread_capacity;
  cfg.drain_timers_within = std::chrono::milliseconds(c.drain_timers_within_ms);
  return cfg;
}

}  // namespace

spool_pool::spool_pool(const spool::config& cfg)
    : core(*spool::detail::create_core(cfg)), face(spool::pool::borrowed_core{}, &core) {
  core.set_c_face(this);
}

spool_pool::~spool_pool() { spool::detail::destroy_core(&core); }

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
  using std::chrono::duration_cast;
  using ms = std::chrono::milliseconds;
  using us = std::chrono::microseconds;
  cfg->min_threads = defaults.min_threads;
  cfg->max_threads = defaults.max_threads;
  cfg->keep_alive_ms = static_cast<unsigned>(duration_cast<ms>(defaults.keep_alive).count());
  cfg->monitor_min_interval_us =
      static_cast<unsigned>(duration_cast<us>(defaults.monitor_min_interval).count());
  cfg->monitor_max_interval_us =
      static_cast<unsigned>(duration_cast<us>(defaults.monitor_max_interval).count());
  cfg->aging_ms = static_cast<unsigned>(duration_cast<ms>(defaults.aging).count());
  cfg->defer_period_us = static_cast<unsigned>(defaults.defer_period.count());
  cfg->on_scale = nullptr;
  cfg->on_scale_arg = nullptr;
  cfg->on_worker_start = nullptr;
  cfg->on_worker_stop = nullptr;
  cfg->worker_hook_arg = nullptr;
  cfg->affinity = nullptr;
  cfg->affinity_count = 0;
  cfg->thread_capacity = defaults.thread_capacity;
  cfg->drain_timers_within_ms =
      static_cast<unsigned>(duration_cast<ms>(defaults.drain_timers_within).count());
  cfg->on_task_start = nullptr;
  cfg->on_task_finish = nullptr;
  cfg->task_hook_arg = nullptr;
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
  if (c.affinity == nullptr && c.affinity_count != 0) return SPOOL_EINVAL;
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

int spool_submit_priority(spool_pool* pool, int priority, void (*fn)(void*), void* arg,
                          void (*on_cancel)(void*)) {
  if (pool == nullptr || fn == nullptr) return SPOOL_EINVAL;
  if (priority < SPOOL_PRIORITY_LOW || priority > SPOOL_PRIORITY_HIGH) return SPOOL_EINVAL;
  auto* t = new (std::nothrow) c_task(fn, arg, on_cancel);
  if (t == nullptr) return SPOOL_ENOMEM;
  return to_c(pool->core.submit(t, static_cast<spool::priority>(priority)));
}

int spool_submit_named(spool_pool* pool, int priority, const char* name, void (*fn)(void*),
                       void* arg, void (*on_cancel)(void*)) {
  if (pool == nullptr || fn == nullptr) return SPOOL_EINVAL;
  if (priority < SPOOL_PRIORITY_LOW || priority > SPOOL_PRIORITY_HIGH) return SPOOL_EINVAL;
  auto* t = new (std::nothrow) c_task(fn, arg, on_cancel, name);
  if (t == nullptr) return SPOOL_ENOMEM;
  return to_c(pool->core.submit(t, static_cast<spool::priority>(priority)));
}

int spool_submit_bulk(spool_pool* pool, void (*fn)(void*), void* const* args, size_t n,
                      size_t* accepted) {
  if (accepted != nullptr) *accepted = 0;
  if (pool == nullptr || fn == nullptr || (args == nullptr && n != 0)) return SPOOL_EINVAL;
  // From a worker or a thread with a producer slot, as one range submission (src/api/range.cpp):
  // the workers share the function and a copy of args, and take the indices in chunks.
  if (n > 1 && pool->core.takes_ranges()) {
    struct calls {
      void (*fn)(void*);
      std::unique_ptr<void*[]> args;
      void operator()(std::size_t i) const { fn(args[i]); }
    };
    std::unique_ptr<void*[]> copy(new (std::nothrow) void*[n]);
    spool::detail::range_job* job = nullptr;
    if (copy != nullptr) {
      std::copy(args, args + n, copy.get());
      job = new (std::nothrow) spool::detail::range_job_of<calls>(n, calls{fn, std::move(copy)});
    }
    if (job == nullptr) return SPOOL_ENOMEM;
    const spool::bulk_result r = pool->core.submit_range(job);
    if (accepted != nullptr) *accepted = r.accepted;
    return to_c(r.error);
  }
  struct batch {
    void (*fn)(void*);
    void* const* args;
  } b{fn, args};
  auto make = [](void* context, std::size_t i) noexcept -> spool::detail::work_item* {
    auto* bb = static_cast<batch*>(context);
    return new (std::nothrow) c_task(bb->fn, bb->args[i], nullptr);
  };
  const spool::bulk_result r = pool->core.submit_bulk(n, make, &b);
  if (accepted != nullptr) *accepted = r.accepted;
  return to_c(r.error);
}

int spool_submit_ex(spool_pool* pool, void (*fn)(void*), void* arg, void (*on_cancel)(void*)) {
  return spool_submit_priority(pool, SPOOL_PRIORITY_NORMAL, fn, arg, on_cancel);
}

int spool_submit(spool_pool* pool, void (*fn)(void*), void* arg) {
  return spool_submit_ex(pool, fn, arg, nullptr);
}

int spool_wait_idle(spool_pool* pool) {
  if (pool == nullptr) return SPOOL_EINVAL;
  return to_c(pool->core.wait_idle());
}

int spool_close(spool_pool* pool) {
  if (pool == nullptr || spool::detail::is_default_pool(pool)) return SPOOL_EINVAL;
  pool->core.close();
  return SPOOL_OK;
}

int spool_shutdown(spool_pool* pool, spool_shutdown_mode mode, size_t* dropped) {
  if (pool == nullptr || spool::detail::is_default_pool(pool)) return SPOOL_EINVAL;
  static_assert(sizeof(spool_shutdown_mode) == sizeof(int));
  int m;
  std::memcpy(&m, &mode, sizeof m);
  if (m != SPOOL_SHUTDOWN_DRAIN && m != SPOOL_SHUTDOWN_DISCARD) return SPOOL_EINVAL;
  return to_c(pool->core.shutdown(static_cast<spool::shutdown_mode>(mode), dropped));
}

int spool_shutdown_timed(spool_pool* pool, long timeout_ms, spool_shutdown_report* report) {
  if (pool == nullptr || spool::detail::is_default_pool(pool) || timeout_ms < 0) {
    return SPOOL_EINVAL;
  }
  const auto deadline = spool::detail::deadline_after(std::chrono::milliseconds(timeout_ms));
  spool::shutdown_report r;
  const int rc = to_c(pool->core.shutdown(spool::shutdown_mode::drain, &deadline, &r));
  if (rc == SPOOL_OK && report != nullptr) {
    report->dropped = r.dropped;
    report->timers_dropped = r.timers_dropped;
    report->timed_out = r.timed_out ? 1 : 0;
  }
  return rc;
}

int spool_destroy(spool_pool* pool) {
  if (pool == nullptr || spool::detail::is_default_pool(pool)) return SPOOL_EINVAL;
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
  out->threads_blocked = s.threads_blocked;
  out->threads_started = s.threads_started;
  out->threads_retired = s.threads_retired;
  out->grown_for_load = s.grown_for_load;
  out->grown_for_blocking = s.grown_for_blocking;
  return SPOOL_OK;
}

int spool_worker_index(void) { return spool::this_worker_index(); }

spool_pool* spool_this_pool(void) {
  if (const spool::detail::worker* w = spool::detail::current_worker()) return w->owner.c_face();
  if (const spool::detail::core* c = spool::detail::core::running_outside()) return c->c_face();
  return nullptr;
}

int spool_resize(spool_pool* pool, unsigned min_threads, unsigned max_threads) {
  if (pool == nullptr) return SPOOL_EINVAL;
  return to_c(pool->core.resize(min_threads, max_threads));
}

int spool_pause(spool_pool* pool) {
  if (pool == nullptr) return SPOOL_EINVAL;
  return to_c(pool->core.pause());
}

int spool_resume(spool_pool* pool) {
  if (pool == nullptr) return SPOOL_EINVAL;
  pool->core.resume();
  return SPOOL_OK;
}

int spool_is_paused(const spool_pool* pool) {
  if (pool == nullptr) return SPOOL_EINVAL;
  return pool->core.paused() ? 1 : 0;
}

int spool_wait_idle_for(spool_pool* pool, long timeout_ms) {
  if (pool == nullptr) return SPOOL_EINVAL;
  if (timeout_ms < 0) return to_c(pool->core.wait_idle());
  bool idle = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (int rc = to_c(pool->core.wait_idle_until(deadline, &idle)); rc != SPOOL_OK) return rc;
  return idle ? SPOOL_OK : SPOOL_ETIMEDOUT;
}

spool_pool* spool_default_pool(void) {
  try {
    return spool::detail::default_c_pool();
  } catch (...) {
    return nullptr;
  }
}

size_t spool_allowed_cpus(unsigned* cpus, size_t cap) {
  std::vector<unsigned> all;
  try {
    all = spool::allowed_cpus();
  } catch (...) {
    return 0;
  }
  if (cpus != nullptr) std::copy_n(all.begin(), std::min(cap, all.size()), cpus);
  return all.size();
}

void spool_blocking_begin(void) { spool::detail::blocking_begin(); }

void spool_blocking_end(void) { spool::detail::blocking_end(); }

int spool_isolate(spool_pool* pool, void (*fn)(void*), void* arg) {
  if (pool == nullptr || fn == nullptr) return SPOOL_EINVAL;
  if (!pool->core.is_own_worker()) {
    fn(arg);
    return SPOOL_OK;
  }
  spool::isolate([fn, arg] { fn(arg); });
  return SPOOL_OK;
}

}  // extern "C"
