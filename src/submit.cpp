// submit.cpp: how a task enters the pool (src/README.md, "Where a submission goes"): from a
// worker onto its own deque; from an outside thread into its producer slot, after reserving
// room in a bounded pool's count; otherwise through the injector. The injector holds the
// bound, and a full one gets the full-queue policy on either path.
//
// Every path counts the submission (in exactly one counter) before the task becomes visible,
// so the pool can never look quiescent with the task neither finished nor counted; a refusal
// undoes the count and then tells quiescence (the undone count may be what makes the pool
// quiescent). Every path that makes a task visible then calls sleep_.notify_worker().
#include <sched.h>

#include "core.hpp"
#include "sync/cpu_relax.hpp"

namespace spool::detail {
namespace {

// submit_bulk wakes a worker after the first task and then after every this many.
constexpr std::size_t k_bulk_notify = 64;

}  // namespace

std::error_code core::submit(work_item* t, priority p) noexcept {
  if (worker* w = own_worker()) {
    idle_.tally(w, &counters::submitted, 1);
    // From inside the pool: the worker's own deque (or, for another priority, the injector
    // past its bound), never blocking. Accepted while draining (it is part of finishing
    // queued work); refused while discarding.
    if (discarding()) return refuse(w, t, errc::shut_down);
    stamp_region(*t, *w);
    if (p == priority::normal) {
      try {
        w->push_local(t);
      } catch (...) {
        return refuse(w, t, errc::no_memory);
      }
    } else if (std::error_code err = queues_.shared().push(t, p, /*bypass_bound=*/true).error) {
      return refuse(w, t, err);
    }
    sleep_.notify_worker();
    return {};
  }

  // From outside the pool (another pool's worker is an outsider here too).
  if (p == priority::normal) {
    if (producer_slot* slot = queues_.slots().mine()) {
      if (!queues_.shared().bounded()) return submit_to_slot(*slot, t);
      return submit_bounded_to_slot(*slot, t);
    }
  }

  idle_.tally(nullptr, &counters::submitted, 1);
  injector& shared = queues_.shared();
  // A producer about to wait for room stops taking a core (see outside_sleeps).
  if (shared.full() && blocks_when_full()) sleep_.outside_sleeps();
  auto [err, evicted] = shared.push(t, p);
  if (evicted != nullptr) {  // discard_oldest: the queue is not empty, so no idle waiter to tell
    evicted->cancel();
    idle_.tally(nullptr, &counters::cancelled, 1);
  }
  if (!err) {
    counts_.accepted_outside();
    sleep_.note_outside();
    sleep_.notify_worker();
    return {};
  }
  if (err == errc::full && cfg_.on_full == full_policy::caller_runs) return run_in_caller(t);
  return refuse(nullptr, t, err);
}

std::error_code core::submit_bounded_to_slot(producer_slot& slot, work_item* t) noexcept {
  injector& shared = queues_.shared();
  if (!shared.try_reserve()) {
    // Full: the policy, as the injector applies it (discard_oldest pools have no slots).
    std::error_code why;
    if (blocks_when_full()) {
      if (!poll_for_room(shared)) {
        sleep_.outside_sleeps();
        why = shared.wait_for_room();  // the task is counted in the slot once it has room
        if (why) idle_.tally(nullptr, &counters::submitted, 1);
      }
    } else {
      // Counted first, then the closed check, as for a slot (submit_to_slot): a shutdown
      // either sees the count and waits for the task run here, or this sees the flag.
      idle_.tally(nullptr, &counters::submitted, 1);
      if (closed_after_barrier()) {
        why = errc::shut_down;
      } else if (cfg_.on_full == full_policy::caller_runs) {
        return run_in_caller(t);
      } else {
        why = errc::full;
      }
    }
    if (why) return refuse(nullptr, t, why);
  }
  // The room is reserved; it goes back when a worker (or a drain, or this thread taking the
  // task back) takes the task out of the slot, or now if the slot refuses it.
  const std::error_code why = submit_to_slot(slot, t);
  if (why) shared.release(1);
  return why;
}

std::error_code core::run_in_caller(work_item* t) noexcept {
  // Counted as submitted by the caller already; finished in the outsiders' counters.
  counts_.accepted_outside();
  execute(nullptr, t);
  idle_.notify();  // this may have been the last task
  return {};
}

bool core::poll_for_room(injector& shared) noexcept {
  // config::spin_rounds rounds (nothing at 0), as an idle worker spins: the workers give room
  // back a run at a time, often within a microsecond, and a sleep on the injector's condition
  // variable and the wake-up cost several. The first rounds pause; later ones yield the
  // processor, since the threads that would free room may be waiting for this one's core.
  for (unsigned round = 0; round < cfg_.spin_rounds; ++round) {
    if (round < sleep_control::k_pause_rounds) {
      for (int i = 0; i < sleep_control::k_pauses_per_look; ++i) cpu_relax();
    } else {
      sched_yield();
    }
    if (shared.try_reserve()) return true;  // one load, and no write while full
  }
  return false;
}

std::error_code core::submit_due(work_item* t, priority p) noexcept {
  idle_.tally(nullptr, &counters::submitted, 1);
  std::error_code why;
  if (closed_after_barrier()) {
    why = errc::shut_down;
  } else {
    why = queues_.shared().push(t, p, /*bypass_bound=*/true).error;  // only no_memory
  }
  if (why) {
    counts_.rejected();
    idle_.tally(nullptr, &counters::submitted, ~std::uint64_t{0});  // minus one
    idle_.notify();
    return why;
  }
  counts_.accepted_outside();
  sleep_.notify_worker();
  return {};
}

bulk_result core::submit_bulk(std::size_t n, work_item* (*make)(void*, std::size_t),
                              void* context) noexcept {
  bulk_result r;
  if (n == 0) return r;
  worker* w = own_worker();
  const bool own = w != nullptr;
  producer_slot* slot = own ? nullptr : queues_.slot_for_batches();
  if (!own && slot == nullptr) {
    // One submission at a time (a bounded pool, or more outside threads than slots): each
    // task meets the bound and the policy on its own.
    for (; r.accepted < n; ++r.accepted) {
      work_item* t = make(context, r.accepted);
      if (t == nullptr) {
        r.error = errc::no_memory;
        break;
      }
      if ((r.error = submit(t))) break;
    }
    return r;
  }

  r.error = enter_batch(w, slot, n);
  while (!r.error && r.accepted < n) {
    work_item* t = make(context, r.accepted);
    if (t == nullptr) {
      r.error = errc::no_memory;
      break;
    }
    try {
      if (own) {
        stamp_region(*t, *w);
        w->push_local(t);
      } else {
        slot->deque.push(t);
      }
    } catch (...) {
      t->destroy();
      r.error = errc::no_memory;
      break;
    }
    // Wake a worker with the first task and every k_bulk_notify after it, not only at the
    // end: the workers then run the batch while it is still being made (and while its tasks
    // are still in this core's cache), and one that emptied the deque and slept meanwhile is
    // woken again. A notify that finds no sleeper costs two loads (and a fence if one spins).
    if (++r.accepted % k_bulk_notify == 1) sleep_.notify_worker();
  }
  if (const std::uint64_t refused = n - r.accepted; refused != 0) {
    leave_batch(w, slot, refused);
  }
  if (r.accepted != 0) {
    if (!own) add_owned(slot->accepted, r.accepted);
    sleep_.notify_worker();  // the woken worker passes the baton on (wake_for_surplus)
  }
  return r;
}

std::error_code core::enter_batch(worker* w, producer_slot* slot, std::size_t n) noexcept {
  // Counted for the whole batch before any task is visible. For a slot, the closed check
  // follows the count with the light barrier, once for the batch (see submit_to_slot).
  if (w != nullptr) {
    idle_.tally(w, &counters::submitted, n);
    return discarding() ? errc::shut_down : std::error_code{};
  }
  add_owned(slot->entered, n);
  slot->owner_pushed(nullptr);
  sleep_.note_outside();
  return closed_after_barrier() ? errc::shut_down : std::error_code{};
}

void core::leave_batch(worker* w, producer_slot* slot, std::size_t refused) noexcept {
  counts_.rejected(refused);
  if (w != nullptr) {
    idle_.tally(w, &counters::submitted, 0 - refused);
  } else {
    add_owned(slot->entered, 0 - refused);
  }
  idle_.notify();  // the undone count may be what makes the pool quiescent
}

std::error_code core::submit_to_slot(producer_slot& slot, work_item* t) noexcept {
  // Counted, then the closed check, with the light barrier between: close() sets the flag,
  // takes the heavy barrier and then reads these counts (quiescence::wait), so either we see
  // the flag and back out, or the shutdown sees our count and waits for the task, which the
  // workers will find in the slot. The same contract holds for a batch (enter_batch).
  add_owned(slot.entered, 1);
  std::error_code why;
  if (closed_after_barrier()) {
    why = errc::shut_down;
  } else {
    try {
      slot.deque.push(t);
    } catch (...) {
      why = errc::no_memory;
    }
  }
  if (why) {
    counts_.rejected();
    t->destroy();
    add_owned(slot.entered, ~std::uint64_t{0});  // minus one
    idle_.notify();
    return why;
  }
  add_owned(slot.accepted, 1);
  slot.owner_pushed(t);
  sleep_.note_outside(slot.takes_back);
  sleep_.notify_worker(slot.takes_back);
  return {};
}

namespace {
// The pool whose task this thread runs in run_own_task (nested: the innermost), else null.
thread_local const core* tls_running_own = nullptr;
}  // namespace

bool core::runs_own_task_here() const noexcept { return tls_running_own == this; }

bool core::run_own_task(work_item* t) noexcept {
  if (!queues_.take_back(t)) return false;
  // Counted as submitted in the slot; finished in the outsiders' counters, as caller_runs.
  const core* outer = tls_running_own;
  tls_running_own = this;
  execute(nullptr, t);
  tls_running_own = outer;
  idle_.notify();  // this may have been the last task
  return true;
}

std::error_code core::refuse(worker* w, work_item* t, std::error_code why) noexcept {
  counts_.rejected();
  t->destroy();
  idle_.tally(w, &counters::submitted, ~std::uint64_t{0});  // minus one
  // The undone count may be what makes the pool quiescent.
  idle_.notify();
  return why;
}

}  // namespace spool::detail
