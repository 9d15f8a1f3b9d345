// monitor.cpp: elastic sizing. Threads start (grow) for the pool's first min_threads, when a
// worker enters a blocking_region, and when the monitor sees work waiting while too few
// workers are running; they retire when idle for keep_alive above min_threads. The monitor
// sleeps whenever the pool is idle. The design note is src/README.md, "Elastic sizing".
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core.hpp"

namespace spool::detail {
namespace {

// CPU time used so far by the thread owning `clock` (a pthread CPU clock), or -1 if it is gone.
std::int64_t cpu_ns(int clock) noexcept {
  if (clock == worker::k_no_clock) return -1;
  timespec ts{};
  if (clock_gettime(static_cast<clockid_t>(clock), &ts) != 0) return -1;
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Whether the kernel has the thread runnable (state R: on a CPU or waiting for one), from
// /proc/self/task/<tid>/stat. Read only to confirm a stall before growing: a thread that
// used little CPU because other processes had the cores is not blocked.
bool runnable(int tid) noexcept {
  if (tid <= 0) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char buf[256];
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "tid (comm) S ...": the state follows the last ')' (comm may contain parentheses).
  const char* close = std::strrchr(buf, ')');
  return close != nullptr && close[1] == ' ' && close[2] == 'R';
}

}  // namespace

std::error_code core::grow(scale_event::cause why) noexcept {
  unsigned index;
  unsigned live_after;
  {
    std::lock_guard lock(scale_mu_);
    if (terminate_.load(std::memory_order_relaxed)) return errc::shut_down;
    if (live_.load(std::memory_order_relaxed) >= max_threads_) return errc::full;
    // A free slot, else a retired one (joined here: its thread has left worker_main and at
    // most runs its on_scale callback), else a new one. live < max guarantees one exists.
    worker* w = nullptr;
    const auto ws = workers();
    for (const auto& candidate : ws) {
      if (candidate->state == worker::slot_state::free) {
        w = candidate.get();
        break;
      }
    }
    if (w == nullptr) {
      for (const auto& candidate : ws) {
        if (candidate->state == worker::slot_state::retired) {
          candidate->thread.join();
          candidate->state = worker::slot_state::free;
          w = candidate.get();
          break;
        }
      }
    }
    if (w == nullptr) {
      const std::uint32_t n = created_.load(std::memory_order_relaxed);
      try {
        workers_[n] = std::make_unique<worker>(*this, n);
      } catch (...) {
        return errc::no_memory;
      }
      w = workers_[n].get();
      created_.store(n + 1, std::memory_order_release);  // publishes the constructed slot
    }
    // The thread starts idle (it has found nothing yet) and counted live, so that the monitor
    // and blocking_region see it at once; on failure both are undone.
    w->idle.store(true, std::memory_order_relaxed);
    w->cpu_clock.store(worker::k_no_clock, std::memory_order_relaxed);
    // Counted before the thread exists, so that anything the thread does (and whoever learns
    // of it) comes after the count; undone if the OS refuses.
    auto* cause_counter = why == scale_event::cause::load       ? &grown_for_load_
                          : why == scale_event::cause::blocking ? &grown_for_blocking_
                                                                : nullptr;
    live_after = live_.fetch_add(1, std::memory_order_relaxed) + 1;
    threads_started_.fetch_add(1, std::memory_order_relaxed);
    if (cause_counter != nullptr) cause_counter->fetch_add(1, std::memory_order_relaxed);
    try {
      w->thread = std::thread([this, w] { worker_main(*w); });
    } catch (...) {
      live_.fetch_sub(1, std::memory_order_relaxed);
      threads_started_.fetch_sub(1, std::memory_order_relaxed);
      if (cause_counter != nullptr) cause_counter->fetch_sub(1, std::memory_order_relaxed);
      return errc::system;
    }
    w->state = worker::slot_state::running;
    w->active.store(true, std::memory_order_relaxed);
    index = w->index;
  }
  emit(scale_event::kind::started, why, index, live_after);
  return {};
}

bool core::try_retire(worker& w) noexcept {
  unsigned live_after;
  {
    std::lock_guard lock(scale_mu_);
    // At terminate, stop_workers() joins every thread itself; below min nobody retires.
    if (terminate_.load(std::memory_order_relaxed)) return false;
    if (live_.load(std::memory_order_relaxed) <= min_threads_) return false;
    live_after = live_.fetch_sub(1, std::memory_order_relaxed) - 1;
    threads_retired_.fetch_add(1, std::memory_order_relaxed);
    w.state = worker::slot_state::retired;
    w.active.store(false, std::memory_order_relaxed);
  }
  emit(scale_event::kind::retired, scale_event::cause::idle, w.index, live_after);
  {
    std::lock_guard lock(monitor_mu_);
    monitor_join_ = true;
  }
  monitor_cv_.notify_one();
  return true;
}

void core::join_retired() noexcept {
  std::lock_guard lock(scale_mu_);
  for (const auto& w : workers()) {
    if (w->state != worker::slot_state::retired) continue;
    w->thread.join();
    w->state = worker::slot_state::free;
  }
}

void core::became_busy(worker& w) noexcept {
  if (!elastic_) return;
  // Dekker with the monitor going to sleep (monitor_main): we clear our idle flag, then read
  // its asleep flag; it sets that flag, then reads ours. One of us sees the other.
  w.idle.store(false, std::memory_order_relaxed);
#ifdef SPOOL_TSAN
  if (!monitor_asleep_.exchange(false, std::memory_order_seq_cst)) return;
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!monitor_asleep_.load(std::memory_order_relaxed)) return;
#endif
  kick_monitor();
}

void core::kick_monitor() noexcept {
  {
    std::lock_guard lock(monitor_mu_);
    monitor_kicked_ = true;
  }
  monitor_cv_.notify_one();
}

bool core::pool_idle() const noexcept {
  for (const auto& w : workers()) {
    if (w->active.load(std::memory_order_relaxed) && !w->idle.load(std::memory_order_relaxed)) {
      return false;
    }
  }
  return !has_work();
}

void core::monitor_main() noexcept {
  {
    std::string name = cfg_.name + "-mon";
    name.resize(std::min<std::size_t>(name.size(), 15));
    pthread_setname_np(pthread_self(), name.c_str());
  }
  using clock = std::chrono::steady_clock;
  std::vector<std::int64_t> last_cpu(max_threads_, -1);
  std::vector<int> stalled;  // thread ids of busy workers that used little CPU
  stalled.reserve(max_threads_);
  auto interval = cfg_.monitor_min_interval;
  clock::time_point last_check = clock::now();
  bool active = true;  // the pool starts with min_threads idle workers, but look once

  std::unique_lock lock(monitor_mu_);
  for (;;) {
    if (monitor_stop_) return;
    if (monitor_join_) {
      monitor_join_ = false;
      lock.unlock();
      join_retired();
      lock.lock();
      continue;
    }
    if (!active) {
      // Asleep until a worker becomes busy (became_busy), a thread retires, or shutdown.
      monitor_cv_.wait(lock, [this] { return monitor_kicked_ || monitor_join_ || monitor_stop_; });
      if (!monitor_kicked_) continue;
      monitor_kicked_ = false;
      monitor_asleep_.store(false, std::memory_order_relaxed);
      active = true;
      interval = cfg_.monitor_min_interval;
      last_check = clock::now();
      for (const auto& w : workers()) last_cpu[w->index] = cpu_ns(w->cpu_clock.load());
      continue;
    }
    monitor_cv_.wait_for(lock, interval, [this] { return monitor_join_ || monitor_stop_; });
    if (monitor_stop_ || monitor_join_) continue;
    lock.unlock();

    // A busy worker counts as running if its thread used at least a quarter of the elapsed
    // time on a CPU; a worker blocked inside its task (I/O, a lock, a latch, a future whose
    // task is stuck) uses none. Completed tasks are not the measure: a long computation makes
    // progress without completing anything.
    const clock::time_point now = clock::now();
    const std::int64_t elapsed =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_check).count();
    last_check = now;
    unsigned idle = 0;
    unsigned running = 0;
    stalled.clear();
    for (const auto& w : workers()) {
      const std::int64_t cpu = cpu_ns(w->cpu_clock.load(std::memory_order_relaxed));
      const std::int64_t before = std::exchange(last_cpu[w->index], cpu);
      if (!w->active.load(std::memory_order_relaxed)) continue;
      if (w->idle.load(std::memory_order_relaxed)) {
        ++idle;
      } else if (cpu < 0 || before < 0 || cpu < before || (cpu - before) * 4 >= elapsed) {
        ++running;  // on the CPU (or a fresh thread, not yet measurable)
      } else {
        stalled.push_back(w->tid.load(std::memory_order_relaxed));
      }
    }
    bool grew = false;
    if (idle == 0 && running < min_threads_ && has_work()) {
      // Confirm with the scheduler: preempted (runnable) threads are not blocked.
      for (int tid : stalled) running += runnable(tid) ? 1 : 0;
      if (running < min_threads_) grew = !grow(scale_event::cause::load);
    }

    lock.lock();
    if (grew) {
      interval = cfg_.monitor_min_interval;
      continue;
    }
    interval = std::min(interval * 2, cfg_.monitor_max_interval);
    if (!pool_idle()) continue;
    // Going to sleep: Dekker with became_busy(). Clear stale kicks, announce, then look again;
    // a worker that became busy before our announcement is seen by this second look.
    monitor_kicked_ = false;
#ifdef SPOOL_TSAN
    monitor_asleep_.exchange(true, std::memory_order_seq_cst);
#else
    monitor_asleep_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
    if (pool_idle()) {
      active = false;
    } else {
      monitor_asleep_.store(false, std::memory_order_relaxed);
    }
  }
}

void core::emit(scale_event::kind what, scale_event::cause why, unsigned index,
                unsigned live) noexcept {
  if (!cfg_.on_scale) return;
  try {
    cfg_.on_scale(scale_event{what, why, index, live});
  } catch (...) {
    std::fputs("spool: the on_scale callback threw; ignored\n", stderr);
  }
}

}  // namespace spool::detail
