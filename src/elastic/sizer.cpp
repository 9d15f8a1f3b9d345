// elastic/sizer.cpp: starting, retiring and joining threads, and blocking regions (see
// sizer.hpp). The monitor is in monitor.cpp.
#include "elastic/sizer.hpp"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "core.hpp"

namespace spool::detail {

void name_this_thread(std::string name) noexcept {
  name.resize(std::min<std::size_t>(name.size(), 15));  // the kernel's limit
  pthread_setname_np(pthread_self(), name.c_str());
}

sizer::sizer(const config& cfg, unsigned min_threads, unsigned max_threads, unsigned capacity,
             roster& workers, const queues& work) noexcept
    : cfg_(cfg),
      min_threads_(min_threads),
      max_threads_(max_threads),
      capacity_(capacity),
      keep_alive_(cfg.keep_alive),
      workers_(workers),
      work_(work) {}

std::error_code sizer::grow(scale_event::cause why) noexcept {
  unsigned index;
  unsigned live_after;
  {
    std::lock_guard lock(scale_mu_);
    if (terminate_.load(std::memory_order_relaxed)) return errc::shut_down;
    if (live_.load(std::memory_order_relaxed) >= max_threads_.load(std::memory_order_relaxed)) {
      return errc::full;
    }
    // A free slot, else a retired one (joined here: its thread has left the worker loop and
    // at most runs its on_scale callback), else a new one. live < max guarantees one exists.
    worker* w = nullptr;
    const auto ws = workers_.all();
    for (const auto& candidate : ws) {
      if (candidate->thread.state == thread_slot::state_kind::free) {
        w = candidate.get();
        break;
      }
    }
    if (w == nullptr) {
      for (const auto& candidate : ws) {
        if (candidate->thread.state == thread_slot::state_kind::retired) {
          candidate->thread.thread.join();
          candidate->thread.state = thread_slot::state_kind::free;
          w = candidate.get();
          break;
        }
      }
    }
    if (w == nullptr) w = workers_.create();
    if (w == nullptr) return errc::no_memory;
    // The thread starts idle (it has found nothing yet) and counted live, so that the monitor
    // and blocking_region see it at once; on failure both are undone.
    w->thread.idle.store(true, std::memory_order_relaxed);
    w->thread.cpu_clock.store(thread_slot::k_no_clock, std::memory_order_relaxed);
    // Counted before the thread exists, so that anything the thread does (and whoever learns
    // of it) comes after the count; undone if the OS refuses.
    auto* cause_counter = why == scale_event::cause::load       ? &grown_for_load_
                          : why == scale_event::cause::blocking ? &grown_for_blocking_
                                                                : nullptr;
    live_after = live_.fetch_add(1, std::memory_order_relaxed) + 1;
    threads_started_.fetch_add(1, std::memory_order_relaxed);
    if (cause_counter != nullptr) cause_counter->fetch_add(1, std::memory_order_relaxed);
    try {
      w->thread.thread = std::thread([w] { w->owner.run_worker(*w); });
    } catch (...) {
      live_.fetch_sub(1, std::memory_order_relaxed);
      threads_started_.fetch_sub(1, std::memory_order_relaxed);
      if (cause_counter != nullptr) cause_counter->fetch_sub(1, std::memory_order_relaxed);
      return errc::system;
    }
    w->thread.state = thread_slot::state_kind::running;
    w->thread.active.store(true, std::memory_order_relaxed);
    index = w->index;
  }
  emit(scale_event::kind::started, why, index, live_after);
  return {};
}

void sizer::start_monitor() {
  if (elastic()) monitor_ = std::thread([this] { monitor_main(); });
}

std::error_code sizer::resize(unsigned lo, unsigned hi) noexcept {
  if (lo < 1 || lo > hi || hi > capacity_) return errc::invalid_argument;
  {
    std::lock_guard lock(scale_mu_);
    // Under the lock: begin_stop() sets terminate under it too, so after it no monitor starts
    // and stop() sees the one that did.
    if (terminate_.load(std::memory_order_relaxed)) return errc::shut_down;
    min_threads_.store(lo, std::memory_order_relaxed);
    max_threads_.store(hi, std::memory_order_relaxed);
    resized_at_.store(thread_slot::clock::now().time_since_epoch().count(),
                      std::memory_order_relaxed);
    if (elastic() && !monitor_.joinable()) {
      try {
        start_monitor();
      } catch (...) {
        return errc::system;
      }
    }
  }
  // Up to the new min. Another resize may lower max meanwhile: grow() then says full.
  while (live_.load(std::memory_order_relaxed) < min_threads_.load(std::memory_order_relaxed)) {
    const std::error_code ec = grow(scale_event::cause::resize);
    if (ec == errc::full) break;
    if (ec) return ec;
  }
  return {};
}

void sizer::call_worker_hook(const std::function<void(unsigned)>& hook, unsigned index,
                             const char* which) noexcept {
  try {
    hook(index);
  } catch (...) {
    std::fprintf(stderr, "spool: the %s hook threw; ignored\n", which);
  }
}

void sizer::thread_began(worker& w) noexcept {
  clockid_t cpu;
  if (pthread_getcpuclockid(pthread_self(), &cpu) == 0) {
    w.thread.cpu_clock.store(static_cast<int>(cpu), std::memory_order_relaxed);
  }
  w.thread.tid.store(static_cast<int>(gettid()), std::memory_order_relaxed);
  if (!cfg_.affinity.empty()) {
    // The ids were checked against the process's CPU set at construction; the set may have
    // shrunk since (sched_setaffinity by someone else): then the thread runs unpinned.
    const unsigned cpu = cfg_.affinity[w.index % cfg_.affinity.size()];
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
      std::fprintf(stderr, "spool: could not pin worker %u to CPU %u; it runs unpinned\n", w.index,
                   cpu);
    }
  }
  // A new thread counts as idle from its start: one that finds nothing to do (the work that
  // started it was taken by another) still waits keep_alive before it retires.
  w.thread.was_idle = true;
  w.thread.idle_since = std::chrono::steady_clock::now();
}

void sizer::thread_ends(worker& w, bool retired) noexcept {
  w.thread.idle.store(true, std::memory_order_relaxed);
  if (!retired) live_.fetch_sub(1, std::memory_order_relaxed);
}

bool sizer::try_retire(worker& w, scale_event::cause why) noexcept {
  unsigned live_after;
  {
    std::lock_guard lock(scale_mu_);
    // At terminate, stop() joins every thread itself; below min nobody retires, and a retirement
    // for resize only while there are more threads than max.
    if (terminate_.load(std::memory_order_relaxed)) return false;
    const std::uint32_t live = live_.load(std::memory_order_relaxed);
    if (live <= min_threads_.load(std::memory_order_relaxed)) return false;
    if (why == scale_event::cause::resize && live <= max_threads_.load(std::memory_order_relaxed)) {
      return false;
    }
    live_after = live_.fetch_sub(1, std::memory_order_relaxed) - 1;
    threads_retired_.fetch_add(1, std::memory_order_relaxed);
    w.thread.state = thread_slot::state_kind::retired;
    w.thread.active.store(false, std::memory_order_relaxed);
  }
  emit(scale_event::kind::retired, why, w.index, live_after);
  {
    std::lock_guard lock(monitor_mu_);
    monitor_join_ = true;
  }
  monitor_cv_.notify_one();
  return true;
}

void sizer::join_retired() noexcept {
  std::lock_guard lock(scale_mu_);
  for (const auto& w : workers_.all()) {
    if (w->thread.state != thread_slot::state_kind::retired) continue;
    w->thread.thread.join();
    w->thread.state = thread_slot::state_kind::free;
  }
}

void sizer::enter_blocking(worker& w) noexcept {
  if (w.thread.blocking++ != 0) return;  // nested: counted once
  const std::uint32_t blocked = blocked_.fetch_add(1, std::memory_order_relaxed) + 1;
  // Keep min_threads workers free to run: start a compensating thread now rather than wait
  // for the monitor to notice the stall. It retires after keep_alive once it is not needed.
  if (elastic() && live_.load(std::memory_order_relaxed) <
                       min_threads_.load(std::memory_order_relaxed) + blocked) {
    (void)grow(scale_event::cause::blocking);  // at max_threads, or the OS refused: carry on
  }
}

void sizer::begin_stop() noexcept {
  // Under scale_mu_, so that no thread starts after this (grow() checks terminate_ under it)
  // and no worker retires (try_retire() does too): every slot's thread is ours to join.
  std::lock_guard lock(scale_mu_);
  terminate_.store(true, std::memory_order_seq_cst);
}

void sizer::stop() noexcept {
  if (monitor_.joinable()) {
    {
      std::lock_guard lock(monitor_mu_);
      monitor_stop_ = true;
    }
    monitor_cv_.notify_all();
    monitor_.join();
  }
  for (const auto& w : workers_.all()) {
    if (!w->thread.thread.joinable()) continue;
    const bool was_running = w->thread.state == thread_slot::state_kind::running;
    w->thread.thread.join();
    w->thread.state = thread_slot::state_kind::free;
    w->thread.active.store(false, std::memory_order_relaxed);
    if (was_running) {
      emit(scale_event::kind::retired, scale_event::cause::shutdown, w->index,
           live_.load(std::memory_order_relaxed));
    }
  }
}

void sizer::fill(stats& s) const noexcept {
  s.threads_live = live_.load(std::memory_order_relaxed);
  s.threads_blocked = blocked_.load(std::memory_order_relaxed);
  s.threads_started = threads_started_.load(std::memory_order_relaxed);
  s.threads_retired = threads_retired_.load(std::memory_order_relaxed);
  s.grown_for_load = grown_for_load_.load(std::memory_order_relaxed);
  s.grown_for_blocking = grown_for_blocking_.load(std::memory_order_relaxed);
}

void sizer::emit(scale_event::kind what, scale_event::cause why, unsigned index,
                 unsigned live) noexcept {
  if (!cfg_.on_scale) return;
  try {
    cfg_.on_scale(scale_event{what, why, index, live});
  } catch (...) {
    std::fputs("spool: the on_scale callback threw; ignored\n", stderr);
  }
}

}  // namespace spool::detail
