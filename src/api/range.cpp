// api/range.cpp: range submissions (pool::post_n): n calls f(0) .. f(n-1) that the workers share
// through a few tickets instead of n tasks.
//
// Why: a task per index costs an allocation, a deque entry and (for a thread outside the
// pool) a line moved between cores per task. A range_job holds the callable once and a
// counter, `next`, of the first index nobody has claimed; each ticket is a task whose run
// claims chunks of indices from `next` and calls f on them until none are left. A chunk is a
// share of what is left (guided: left / (2 * width), between 1 and k_max_chunk), so the last
// chunks are small and the workers finish together.
//
// How the tickets spread. The submitter queues one ticket, like one post. When it runs, it
// first spawns up to width - 1 more (width: min(n, max_threads, 256)) into its worker's deque,
// with one wake-up for all (each woken worker passes the baton on,
// sleep_control::wake_for_surplus), so every worker that comes looking finds one to steal. A
// ticket that sees high-priority work queued stops claiming and leaves a fresh ticket for the
// rest in its deque, so the batch never holds a worker past a chunk while such work waits.
//
// Counting (what makes wait_idle and shutdown right). The job's n tasks are counted submitted
// by the submission, before the first ticket is visible. Every ticket owns one index, claimed
// when the ticket is made, and that index's outcome is the ticket's own: execute() counts it
// when the ticket returns from run(), drop() counts it cancelled when the ticket is dropped.
// The indices a ticket claims in chunks it counts itself, after running them. So:
//  - every index is counted once: as a ticket's own index, in a chunk, or (below) unclaimed;
//  - while any ticket is alive, its own index is uncounted, so the pool is not quiescent:
//    wait_idle() and shutdown() cannot return while the job (and the callable in it) exists.
// The last ticket to let go of the job (refs) counts whatever nobody claimed as cancelled.
// That is only ever non-zero after a discarding shutdown began: until then a ticket stops
// claiming only when none are left, or after leaving a fresh ticket (which holds a reference).
// It frees the job first, so the callable is destroyed before the pool can become quiescent.
#include <algorithm>

#include "core.hpp"

namespace spool::detail {
namespace {

// The most indices one claim takes: few enough that a worker holding a chunk of slow calls
// leaves the rest to the others, enough that claiming costs nothing next to empty calls.
constexpr std::size_t k_max_chunk = 1024;
// The most tickets one job spreads: enough for every thread of any pool this project sizes
// (an elastic pool's max_threads may be far above what ever runs).
constexpr std::size_t k_max_width = 256;

// Claims indices [lo, hi) of job: `count` of them if count != 0, else a guided chunk.
// False if none are left.
bool claim(range_job& job, std::size_t count, std::size_t& lo, std::size_t& hi) noexcept {
  std::size_t at = job.next.load(std::memory_order_relaxed);
  for (;;) {
    if (at >= job.size) return false;
    const std::size_t left = job.size - at;
    const std::size_t take =
        count != 0 ? std::min(count, left)
                   : std::clamp<std::size_t>(left / (2 * std::size_t{job.width}), 1, k_max_chunk);
    // Relaxed: an index is only a number; the job's contents were published by the queue
    // that carried the first ticket, and `refs` orders the end of every use before the free.
    if (job.next.compare_exchange_weak(at, at + take, std::memory_order_relaxed)) {
      lo = at;
      hi = at + take;
      return true;
    }
  }
}

}  // namespace

// A task that runs a range_job's chunks (see above). Made only by core's range functions.
class range_ticket final : public work_item {
 public:
  range_ticket(range_job& job, std::size_t own, bool spawner) noexcept
      : job_(job), own_(own), spawner_(spawner) {}

  outcome run(core& owner) noexcept override { return owner.run_ticket(*this); }
  void cancel() noexcept override {
    core& owner = *job_.owner;
    owner.release_job(job_, owner.own_worker());
    delete this;
  }
  // Only the first ticket can be refused (core::submit_range); nothing has seen its job.
  void destroy() noexcept override {
    job_.destroy();
    delete this;
  }

 private:
  friend class core;
  range_job& job_;
  const std::size_t own_;  // the index whose outcome is this ticket's own
  const bool spawner_;     // the submitted ticket: spreads the others when it first runs
};

bool core::takes_ranges() noexcept {
  return own_worker() != nullptr || queues_.slot_for_batches() != nullptr;
}

bulk_result core::submit_range(range_job* job) noexcept {
  const std::size_t n = job->size;
  worker* w = own_worker();
  producer_slot* slot = w != nullptr ? nullptr : queues_.slot_for_batches();
  if (w == nullptr && slot == nullptr) {  // pool::try_post_n asked takes_ranges() first
    job->destroy();
    return {0, errc::invalid_argument};
  }
  job->owner = this;
  job->width = static_cast<std::uint32_t>(std::min({n, std::size_t{max_threads_}, k_max_width}));
  job->next.store(1, std::memory_order_relaxed);  // index 0 is the first ticket's
  auto* first = new (std::nothrow) range_ticket(*job, 0, /*spawner=*/true);
  if (first == nullptr) {
    job->destroy();
    return {0, errc::no_memory};
  }
  // All n counted before the ticket is visible, as for any batch.
  std::error_code why = enter_batch(w, slot, n);
  if (!why) {
    if (w != nullptr) stamp_region(*first, *w);
    try {
      if (w != nullptr) {
        w->push_local(first);
      } else {
        slot->deque.push(first);
      }
    } catch (...) {
      why = errc::no_memory;
    }
  }
  if (why) {
    first->destroy();
    leave_batch(w, slot, n);
    return {0, why};
  }
  if (slot != nullptr) add_owned(slot->accepted, n);
  sleep_.notify_worker();
  return {n, {}};
}

bool core::leave_ticket(range_ticket& t, worker* w) noexcept {
  // Claims one index for the new ticket, which holds a reference from before it is visible.
  std::size_t lo = 0, hi = 0;
  if (w == nullptr || !claim(t.job_, 1, lo, hi)) return false;
  t.job_.refs.fetch_add(1, std::memory_order_relaxed);
  auto* next = new (std::nothrow) range_ticket(t.job_, lo, /*spawner=*/false);
  if (next != nullptr) {
    stamp_region(*next, *w);
    try {
      w->push_local(next);
      return true;
    } catch (...) {
      delete next;
    }
  }
  // No memory for it: run its index here, as part of the caller's own chunks.
  t.job_.refs.fetch_sub(1, std::memory_order_relaxed);
  run_chunk(t.job_, w, lo, hi);
  return false;
}

void core::run_chunk(range_job& job, worker* w, std::size_t lo, std::size_t hi) noexcept {
  const std::size_t failed = job.run(*this, lo, hi);
  idle_.tally(w, &counters::completed, hi - lo - failed);
  if (failed != 0) idle_.tally(w, &counters::failed, failed);
}

outcome core::run_ticket(range_ticket& t) noexcept {
  range_job& job = t.job_;
  worker* w = own_worker();  // tickets only ever travel through this pool's deques
  if (t.spawner_) {
    bool spawned = false;
    for (std::uint32_t i = 1; i < job.width; ++i) spawned |= leave_ticket(t, w);
    if (spawned) sleep_.notify_worker();
  }
  const outcome mine =
      job.run(*this, t.own_, t.own_ + 1) == 0 ? outcome::completed : outcome::failed;
  std::size_t lo = 0, hi = 0;
  for (;;) {
    // One load of the gate per chunk: a discarding shutdown stops
    // the ticket; a pause hands the rest to a fresh ticket, which waits at the gate (no new
    // chunk starts while paused).
    const std::uint32_t gate = gate_.bits();
    if ((gate & task_gate::k_discarding) != 0) break;
    // Work of higher priority waits: hand the rest to a fresh ticket behind it and return.
    const injector& shared = queues_.shared();
    if (((gate & task_gate::k_paused) != 0 ||
         (!shared.empty() && shared.queued(priority::high) != 0)) &&
        leave_ticket(t, w)) {
      sleep_.notify_worker();
      break;
    }
    if (!claim(job, 0, lo, hi)) break;
    run_chunk(job, w, lo, hi);
  }
  release_job(job, w);
  delete &t;
  return mine;
}

void core::release_job(range_job& job, worker* w) noexcept {
  // acq_rel: every ticket's claims and calls happen before the last one's read and free.
  if (job.refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const std::size_t unclaimed = job.size - job.next.load(std::memory_order_relaxed);
  job.destroy();
  if (unclaimed != 0) {  // a discarding shutdown stopped the claims
    counts_.dropped(unclaimed);
    idle_.tally(w, &counters::cancelled, unclaimed);
  }
}

}  // namespace spool::detail
