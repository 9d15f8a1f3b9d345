// api/future_state.cpp: completing a future, waiting for it, and running its continuations.
//
// status_ holds k_ready and two "someone sleeps on me" bits. The completer exchanges in
// k_ready and wakes exactly the kinds of sleeper the old value names: a futex wake for
// outside threads sleeping on status_ itself, the pool's parker for workers that help while
// waiting. A sleeper sets its bit with a read-modify-write before sleeping and sleeps only on
// a value that still lacks k_ready, so it either sees the completion or is seen by it. The
// other bits (the claim, the result's kind, the take-back and bound flags) change the word
// too, which at worst makes a futex wait return early; the loops look again.
//
// An outside waiter first tries to run its own task (core::run_own_task): if the task is
// still the oldest in the waiter's producer slot, nothing else can take it once the waiter's
// CAS on the slot's top succeeds, so it runs exactly once, here; complete() then finds no
// sleeper bits and the wait returns at once.
//
// Continuations (then, when_all, when_any, co_await) wait in a second word, continuations_:
// a stack linked through work_item::next, which complete() swaps for the
// closed marker. The invariant: on_ready() is called exactly once on every registered
// continuation, and never before the result is visible. A registrant pushes with a
// compare-exchange that fails if the word is closed; complete() writes the result, then
// exchanges the word. So either the push lands first, and complete()'s exchange (acquire)
// takes it with the list and calls it after the result is written, or the registrant reads
// the closed marker (acquire, pairing with the exchange's release), sees the result, and
// calls it itself. Nothing pushes after the close, so the exchange takes the whole list once.
//
// The pool may be gone. A state records its pool's stamp (src/lifetime/README.md); from a
// thread that is not one of the pool's workers, every touch of the pool (submitting a
// continuation, waking the parker, reading the spin setting) holds a pin, and a pool that is
// gone is treated as one that refuses: the continuation runs on this thread. A worker of the
// pool needs no pin: the pool is not destroyed while one of its tasks runs. Neither does a
// wait on a k_bound state: while it is not ready its task is queued or running, and the pool's
// shutdown makes it ready before the pool goes.
#include <climits>

#include "core.hpp"
#include "lifetime/lifetime.hpp"
#include "sleep/futex.hpp"
#include "sync/cpu_relax.hpp"

namespace spool::detail {
namespace {

// The closed marker: no continuation lives at address 1.
continuation* closed_list() noexcept {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a marker compared, never dereferenced
  return reinterpret_cast<continuation*>(std::uintptr_t{1});
}

bool on_worker_of(const core* c) noexcept {
  const worker* w = current_worker();
  return w != nullptr && &w->owner == c;
}

// run_here's queue: continuations to run on this thread once the one running returns.
struct inline_queue {
  continuation* head = nullptr;
  continuation* tail = nullptr;
  bool draining = false;
};
thread_local inline_queue tl_inline;

}  // namespace

void run_here(continuation* c) noexcept {
  inline_queue& q = tl_inline;
  c->next = nullptr;
  if (q.draining) {
    if (q.tail != nullptr) {
      q.tail->next = c;
    } else {
      q.head = c;
    }
    q.tail = c;
    return;
  }
  q.draining = true;
  c->run_inline();
  while (q.head != nullptr) {
    continuation* next = q.head;  // unlinked before it runs: running may free it
    q.head = static_cast<continuation*>(next->next);
    if (q.head == nullptr) q.tail = nullptr;
    next->run_inline();
  }
  q.draining = false;
}

void dispatch(pool_ref where, priority p, continuation* c) noexcept {
  if (where.owner != nullptr) {
    if (on_worker_of(where.owner)) {
      if (!where.owner->submit(c, p)) return;  // a refusal calls c->destroy(), which frees nothing
    } else {
      pin held(where);
      if (held && !where.owner->submit(c, p)) return;
    }
  }
  run_here(c);
}

std::error_code submit_task(pool_ref where, priority p, work_item* t) noexcept {
  if (on_worker_of(where.owner)) return where.owner->submit(t, p);
  pin held(where);
  if (held) return where.owner->submit(t, p);
  t->destroy();
  return errc::shut_down;
}

pool_ref running_pool() noexcept {
  if (const worker* w = current_worker()) return w->owner.ref();
  if (core* c = core::running_outside()) return c->ref();
  return {};
}

cancel_walk::~cancel_walk() {
  for (state_base* s : pending_) s->release();
}

void cancel_walk::add(state_base* s) noexcept {
  try {
    pending_.push_back(s);
  } catch (...) {
    s->release();  // no memory: the cancellation goes no further this way
  }
}

state_base* cancel_walk::next() noexcept {
  if (pending_.empty()) return nullptr;
  state_base* s = pending_.back();
  pending_.pop_back();
  return s;
}

bool state_base::request_cancel() noexcept {
  cancel_walk up;
  const bool here = cancel_here(up);
  cancel_all(up);
  return here;
}

void state_base::cancel_all(cancel_walk& up) noexcept {
  while (state_base* s = up.next()) {
    s->cancel_here(up);
    s->release();
  }
}

void state_base::complete(held how) noexcept {
  const std::uint32_t result = how == held::value ? k_value : how == held::failure ? k_failure : 0;
  const std::uint32_t old =
      status_.exchange(k_ready | k_claimed | result, std::memory_order_seq_cst);
  // The task (or the completer) still holds its reference, so this object outlives both wakes
  // and the continuations.
  if ((old & k_waited_outside) != 0) futex_wake(status_, INT_MAX);
  if ((old & k_waited_worker) != 0) {
    // A worker of the pool waits, or waited and gave up (wait_until): the pool may be gone
    // only in that second case, and then nobody sleeps in its parker. The two branches do the
    // same, but only the second holds a pin while it does.
    if (on_worker_of(owner_)) {  // NOLINT(bugprone-branch-clone)
      owner_->wake_waiting_workers();
    } else if (pin held(owner()); held) {
      owner_->wake_waiting_workers();
    }
  }
  continuation* list = continuations_.exchange(closed_list(), std::memory_order_acq_rel);
  if (list == nullptr) return;
  // Newest first: reverse, so continuations start in the order they were registered.
  continuation* ordered = nullptr;
  while (list != nullptr) {
    auto* next = static_cast<continuation*>(list->next);
    list->next = ordered;
    ordered = list;
    list = next;
  }
  while (ordered != nullptr) {
    auto* next = static_cast<continuation*>(ordered->next);  // read first: on_ready may free it
    ordered->next = nullptr;
    ordered->on_ready();
    ordered = next;
  }
}

bool state_base::add_continuation(continuation* c) noexcept {
  // complete() sets k_ready before it closes the list, so a thread that has seen the state
  // ready (a wait() that returned) could still find the list open and leave c to the
  // completer. Checking k_ready first keeps the promise of then_inline and co_await: on a
  // state this thread has seen ready, c runs here, at once.
  if (ready()) return false;
  continuation* head = continuations_.load(std::memory_order_acquire);
  do {
    if (head == closed_list()) return false;
    c->next = head;
  } while (!continuations_.compare_exchange_weak(head, c, std::memory_order_release,
                                                 std::memory_order_acquire));
  return true;
}

void state_base::continue_with(continuation* c) noexcept {
  if (!add_continuation(c)) c->on_ready();
}

bool state_base::mark_waited_by_worker() noexcept {
  return (status_.fetch_or(k_waited_worker, std::memory_order_seq_cst) & k_ready) != 0;
}

void state_base::wait() noexcept {
  if (ready()) return;
  if (on_worker_of(owner_)) {
    waitable<state_base> target(*this);
    owner_->help_until(target, nullptr);
    return;
  }
  const std::uint32_t s = status_.load(std::memory_order_relaxed);
  if ((s & k_bound) != 0 && (s & k_own_task) != 0 && owner_->run_own_task(this)) return;
  wait_outside(nullptr);
}

bool state_base::wait_until(std::chrono::steady_clock::time_point deadline) noexcept {
  if (ready()) return true;
  if (on_worker_of(owner_)) {
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
  // a pool configured not to spin keeps its waiters from spinning too. The setting is read
  // from the pool's block (lifetime/), which any thread may read at any time; the pool itself
  // only under a pin, on the way to sleep.
  if (owner_ != nullptr) {
    for (unsigned round = 0, n = waiter_spin_rounds(owner_); round < n; ++round) {
      if (ready()) return;
      for (int i = 0; i < 4; ++i) cpu_relax();
    }
    if (pin held(owner()); held) owner_->outside_sleeps();
  }
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
