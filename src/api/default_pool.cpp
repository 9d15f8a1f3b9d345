// api/default_pool.cpp: the process-wide pool (spool::default_pool, spool_default_pool), and
// the placement helpers (allowed_cpus).
//
// Lifetime. One core, owned by a spool_pool that is created on first use (a function-local
// static: thread-safe) and never freed; the C++ pool is a face that borrows it. Creating it
// registers an atexit handler that shuts it down draining. The C++ runtime runs atexit handlers
// and static destructors in the reverse order of their registration, so a static object
// constructed before the pool's first use is destroyed after the shutdown: it finds a pool
// that still exists and refuses submissions (errc::shut_down). Never freeing the object is what
// makes that defined; its threads are gone, so only the memory stays, as the process ends.
#include "api/default_pool.hpp"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "api/c_task.hpp"
#include "spool/spool.hpp"

namespace spool {
namespace detail {
namespace {

// Set once, by the function-local static below; read by any thread (is_default_pool).
std::atomic<spool_pool*> the_default{nullptr};

void shut_down_default() noexcept {
  // From one of its own workers (exit() inside a task) this refuses (would_deadlock) and the
  // threads are left running as the process ends.
  (void)the_default.load(std::memory_order_acquire)->core.shutdown(shutdown_mode::drain, nullptr);
}

config default_config() {
  config cfg;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
    cfg.threads = static_cast<unsigned>(CPU_COUNT(&set));
  }  // else 0: hardware_concurrency()
  cfg.name = "spool-def";
  return cfg;
}

}  // namespace

spool_pool* default_c_pool() {
  static spool_pool* const instance = [] {
    auto* p = new spool_pool(default_config());
    the_default.store(p, std::memory_order_release);
    std::atexit(shut_down_default);
    return p;
  }();
  return instance;
}

bool is_default_pool(const spool_pool* p) noexcept {
  return p != nullptr && p == the_default.load(std::memory_order_acquire);
}

bool is_default_core(const core* c) noexcept {
  const spool_pool* d = the_default.load(std::memory_order_acquire);
  return d != nullptr && &d->core == c;
}

}  // namespace detail

pool& default_pool() { return detail::default_c_pool()->face; }

std::vector<unsigned> allowed_cpus() {
  std::vector<unsigned> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

}  // namespace spool
