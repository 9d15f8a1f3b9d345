// api/future_state.cpp: completing a future and waiting for it.
//
// status_ holds k_ready and two "someone sleeps on me" bits. The completer exchanges in
// k_ready and wakes exactly the kinds of sleeper the old value names: a futex wake for
// outside threads sleeping on status_ itself, the pool's parker for workers that help while
// waiting. A sleeper sets its bit with a read-modify-write before sleeping and sleeps only on
// a value that still lacks k_ready, so it either sees the completion or is seen by it.
//
// An outside waiter first tries to run its own task (core::run_own_task): if the task is
// still the oldest in the waiter's producer slot, nothing else can take it once the waiter's
// CAS on the slot's top succeeds, so it runs exactly once, here; complete() then finds no
// sleeper bits and the wait returns at once.
#include <climits>

#include "core.hpp"
#include "sync/cpu_relax.hpp"
#include "sleep/futex.hpp"

namespace spool::detail {

void state_base::complete() noexcept {
  const std::uint32_t old = status_.exchange(k_ready, std::memory_order_seq_cst);
  // The task still holds its reference, so this object outlives both wakes.
  if ((old & k_waited_outside) != 0) futex_wake(status_, INT_MAX);
  if ((old & k_waited_worker) != 0) owner_->sleepers().notify_all();
}

bool state_base::mark_waited_by_worker() noexcept {
  return (status_.fetch_or(k_waited_worker, std::memory_order_seq_cst) & k_ready) != 0;
}

void state_base::wait() noexcept {
  if (ready()) return;
  if (owner_->is_own_worker()) {
    waitable<state_base> target(*this);
    owner_->help_until(target, nullptr);
  } else if (own_task_ == nullptr || !owner_->run_own_task(own_task_)) {
    wait_outside(nullptr);
  }
}

bool state_base::wait_until(std::chrono::steady_clock::time_point deadline) noexcept {
  if (ready()) return true;
  if (owner_->is_own_worker()) {
    waitable<state_base> target(*this);
    return owner_->help_until(target, &deadline);
  }
  // No taking back here: running the task would not honour the deadline.
  wait_outside(&deadline);
  return ready();
}

void state_base::wait_outside(const std::chrono::steady_clock::time_point* deadline) noexcept {
  // Poll briefly before sleeping: a task that a spinning worker picks up finishes within a
  // microsecond or so, and a futex sleep and wake-up costs several. Bounded by the pool's
  // spin_rounds (4 pauses a round, a few microseconds at the default), and nothing at 0, so
  // a pool configured not to spin keeps its waiters from spinning too.
  for (unsigned round = 0, n = owner_->spin_rounds(); round < n; ++round) {
    if (ready()) return;
    for (int i = 0; i < 4; ++i) cpu_relax();
  }
  owner_->outside_sleeps();
  std::uint32_t s = status_.load(std::memory_order_acquire);
  while ((s & k_ready) == 0) {
    if ((s & k_waited_outside) == 0) {
      if (!status_.compare_exchange_weak(s, s | k_waited_outside, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
        continue;
      }
      s |= k_waited_outside;
    }
    if (deadline == nullptr) {
      futex_wait(status_, s);
    } else if (!futex_wait_until(status_, s, *deadline)) {
      return;
    }
    s = status_.load(std::memory_order_acquire);
  }
}

}  // namespace spool::detail
