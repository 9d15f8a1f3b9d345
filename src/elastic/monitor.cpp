// elastic/monitor.cpp: the monitor thread of an elastic pool. It grows the pool when work
// waits while fewer than min_threads workers are running, joins retired threads, and sleeps
// whenever the pool is idle (elastic/README.md, "Who starts threads", "The monitor sleeps").
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "elastic/sizer.hpp"
#include "queues/queues.hpp"
#include "sync/dekker.hpp"

namespace spool::detail {
namespace {

// CPU time used so far by the thread owning `clock` (a pthread CPU clock), or -1 if it is gone.
std::int64_t cpu_ns(int clock) noexcept {
  if (clock == thread_slot::k_no_clock) return -1;
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

void sizer::wake_monitor_for(worker& w) noexcept {
  // Dekker with the monitor going to sleep (monitor_main): we clear our idle flag, then read
  // its asleep flag; it sets that flag, then reads ours. One of us sees the other.
  w.thread.idle.store(false, std::memory_order_relaxed);
#ifdef SPOOL_TSAN
  if (!monitor_asleep_.exchange(false, std::memory_order_seq_cst)) return;
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!monitor_asleep_.load(std::memory_order_relaxed)) return;
#endif
  kick_monitor();
}

void sizer::kick_monitor() noexcept {
  {
    std::lock_guard lock(monitor_mu_);
    monitor_kicked_ = true;
  }
  monitor_cv_.notify_one();
}

bool sizer::pool_idle() const noexcept {
  for (const auto& w : workers_.all()) {
    if (w->thread.active.load(std::memory_order_relaxed) &&
        !w->thread.idle.load(std::memory_order_relaxed)) {
      return false;
    }
  }
  return !work_.has_work();
}

void sizer::monitor_main() noexcept {
  name_this_thread(cfg_.name + "-mon");
  using clock = std::chrono::steady_clock;
  std::vector<std::int64_t> last_cpu(capacity_, -1);
  std::vector<int> stalled;  // thread ids of busy workers that used little CPU
  stalled.reserve(capacity_);
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
      // Asleep until a worker becomes busy (went_busy), a thread retires, or shutdown.
      monitor_cv_.wait(lock, [this] { return monitor_kicked_ || monitor_join_ || monitor_stop_; });
      if (!monitor_kicked_) continue;
      monitor_kicked_ = false;
      monitor_asleep_.store(false, std::memory_order_relaxed);
      active = true;
      interval = cfg_.monitor_min_interval;
      last_check = clock::now();
      for (const auto& w : workers_.all()) last_cpu[w->index] = cpu_ns(w->thread.cpu_clock.load());
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
    for (const auto& w : workers_.all()) {
      const std::int64_t cpu = cpu_ns(w->thread.cpu_clock.load(std::memory_order_relaxed));
      const std::int64_t before = std::exchange(last_cpu[w->index], cpu);
      if (!w->thread.active.load(std::memory_order_relaxed)) continue;
      if (w->thread.idle.load(std::memory_order_relaxed)) {
        ++idle;
      } else if (cpu < 0 || before < 0 || cpu < before || (cpu - before) * 4 >= elapsed) {
        ++running;  // on the CPU (or a fresh thread, not yet measurable)
      } else {
        stalled.push_back(w->thread.tid.load(std::memory_order_relaxed));
      }
    }
    bool grew = false;
    // A paused pool's workers hold their tasks without running them: not a stall.
    const unsigned min_threads = min_threads_.load(std::memory_order_relaxed);
    if (idle == 0 && running < min_threads && !growth_held_.load(std::memory_order_relaxed) &&
        work_.has_work()) {
      // Confirm with the scheduler: preempted (runnable) threads are not blocked.
      for (int tid : stalled) running += runnable(tid) ? 1 : 0;
      if (running < min_threads) grew = !grow(scale_event::cause::load);
    }

    lock.lock();
    if (grew) {
      interval = cfg_.monitor_min_interval;
      continue;
    }
    interval = std::min(interval * 2, cfg_.monitor_max_interval);
    if (!pool_idle()) continue;
    // Going to sleep: Dekker with wake_monitor_for(). Clear stale kicks, announce, then look
    // again; a worker that became busy before our announcement is seen by this second look.
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

}  // namespace spool::detail
