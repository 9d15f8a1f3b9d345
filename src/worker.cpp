// worker.cpp: what a worker thread does: find a task (own deque, then the injector, then
// steal), run it, and sleep in the parker when there is none. help_until() is the same loop
// run by a worker that waits on a future.
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "core.hpp"
#include "cpu_relax.hpp"

namespace spool::detail {
namespace {

thread_local worker* tls_worker = nullptr;

inline void bump32(std::atomic<std::uint32_t>& c, int by) noexcept {
  c.store(c.load(std::memory_order_relaxed) + static_cast<std::uint32_t>(by), std::memory_order_relaxed);
}

void name_thread(const std::string& prefix, unsigned index) noexcept {
  std::string name = prefix + "-" + std::to_string(index);
  name.resize(std::min<std::size_t>(name.size(), 15));  // the kernel's limit
  pthread_setname_np(pthread_self(), name.c_str());
}

}  // namespace

worker* current_worker() noexcept { return tls_worker; }

worker* blocking_begin() noexcept {
  worker* w = tls_worker;
  if (w != nullptr) w->owner.enter_blocking(*w);
  return w;
}

void blocking_end() noexcept {
  if (worker* w = tls_worker) w->owner.leave_blocking(*w);
}

void core::worker_main(worker& w) noexcept {
  tls_worker = &w;
  name_thread(cfg_.name, w.index);
  live_.fetch_add(1, std::memory_order_relaxed);
  bool was_idle = false;
  for (;;) {
    if (task* t = find_task(w)) {
      if (was_idle) wake_for_surplus();
      was_idle = false;
      execute(&w, t);
      continue;
    }
    was_idle = true;
    if (spin(w, [] { return false; })) continue;
    // The parker's protocol: announce, look once more, then sleep (src/README.md).
    const std::uint32_t key = parker_.prepare();
    // Every worker passes here before it sleeps, so the last one to go idle tells wait_idle().
    notify_idle_waiters();
    if (terminate_.load(std::memory_order_seq_cst)) {
      parker_.cancel();
      break;
    }
    if (task* t = find_task(w)) {
      parker_.cancel();
      wake_for_surplus();
      was_idle = false;
      execute(&w, t);
      continue;
    }
    parker_.park(key);
  }
  live_.fetch_sub(1, std::memory_order_relaxed);
  tls_worker = nullptr;
}

task* core::find_task(worker& w) noexcept {
  if (task* t = w.deque.pop()) return t;
  if (task* t = injector_.pop()) return t;
  return steal(w);
}

task* core::steal(worker& w) noexcept {
  // Victims: the other workers' deques, then the outside threads' slots.
  const std::size_t n = workers_.size();
  for (;;) {
    const std::size_t slots = slots_.in_use();
    if (n < 2 && slots == 0) return nullptr;
    bool contended = false;
    if (n >= 2) {
      // xorshift64: a cheap random first victim, so thieves do not all hit worker 0.
      w.rng ^= w.rng << 13;
      w.rng ^= w.rng >> 7;
      w.rng ^= w.rng << 17;
      const std::size_t start = static_cast<std::size_t>(w.rng % n);
      for (std::size_t k = 0; k < n; ++k) {
        worker& victim = *workers_[(start + k) % n];
        if (&victim == &w) continue;
        auto [t, retry] = victim.deque.steal();
        if (t != nullptr) {
          tally(&w, &counters::stolen, 1);
          return t;
        }
        contended |= retry;
      }
    }
    for (std::size_t i = 0; i < slots; ++i) {
      auto [t, retry] = slots_[i].deque.steal();
      if (t != nullptr) return t;
      contended |= retry;
    }
    // A lost race means that deque was not empty; giving up now could leave its tasks to an
    // owner that is blocked, so look again until every deque is seen empty.
    if (!contended) return nullptr;
  }
}

bool core::has_work() const noexcept {
  if (!injector_.empty()) return true;
  for (const auto& w : workers_) {
    if (!w->deque.empty()) return true;
  }
  for (std::size_t i = 0, n = slots_.in_use(); i < n; ++i) {
    if (!slots_[i].deque.empty()) return true;
  }
  return false;
}

template <class Done>
bool core::spin(worker&, Done done) noexcept {
  if (cfg_.spin_rounds == 0 || !parker_.try_start_spinning()) return false;
  bool found = false;
  for (unsigned round = 0; round < cfg_.spin_rounds && !found; ++round) {
    for (int i = 0; i < 16; ++i) cpu_relax();
    found = done() || has_work();
  }
  parker_.stop_spinning();
  return found;
}

void core::wake_for_surplus() noexcept {
  // This worker just went from idle to busy. Submissions made while it spun woke nobody, so
  // if more work is queued than the task it took, pass the baton to one sleeper (which does
  // the same in turn): parallelism ramps up one wake-up per task, not one per submission.
  if (has_work()) parker_.notify_one();
}

void core::execute(worker* w, task* t) noexcept {
  if (discarding_.load(std::memory_order_acquire)) {
    drop(w, t);
    return;
  }
  if (w != nullptr) bump32(w->depth, +1);
  const outcome how = t->run(*this);
  if (w != nullptr) bump32(w->depth, -1);
  tally(w,
        how == outcome::completed ? &counters::completed
        : how == outcome::failed  ? &counters::failed
                                  : &counters::cancelled,
        1);
}

bool core::help_until(wait_target& until,
                      const std::chrono::steady_clock::time_point* deadline) noexcept {
  worker& w = *tls_worker;
  for (;;) {
    if (until.done()) return true;
    if (task* t = find_task(w)) {
      execute(&w, t);
      continue;
    }
    if (deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) return false;
    if (spin(w, [&until] { return until.done(); })) {
      if (!until.done()) wake_for_surplus();
      continue;
    }
    const std::uint32_t key = parker_.prepare();
    // After prepare(): either the waker sees our announcement and wakes the parker, or we see
    // the target done here (arm() and the waker's check pair up; see wait_target).
    if (until.arm()) {
      parker_.cancel();
      return true;
    }
    if (task* t = find_task(w)) {
      parker_.cancel();
      until.disarm();
      wake_for_surplus();
      execute(&w, t);
      continue;
    }
    bool in_time = true;
    if (deadline == nullptr) {
      parker_.park(key);
    } else {
      in_time = parker_.park_until(key, *deadline);
    }
    until.disarm();
    if (!in_time) return until.done();
  }
}

}  // namespace spool::detail
