// queues/producer_slots.hpp: lock-free lanes for threads outside the pool.
//
// A thread outside the pool that submits to it gets a slot of its own on its first
// submission: a work-stealing deque that only it pushes to, and that workers steal from,
// oldest first. Submitting is then a store into the thread's own deque, with no lock and no
// line shared with other producers; a single producer's tasks still start in the order they
// were submitted. A bounded pool's producer first reserves room in the bound, one count
// shared with the injector (queues/README.md, "The bound"): its only shared line. A
// discard_oldest pool has no slots (its oldest task must be found in one queue). When every
// slot is taken, later threads use the injector.
//
// Giving slots back. A thread that exits gives its slots back (the thread-local cache's exit
// hook marks each `released`; so does a thread whose cache evicts a pool's entry); the tasks
// still in the slot are drained by the workers as before. A released slot is reused by a
// thread claiming one (claim_released) only under the slot's `batching` lock, with its deque
// empty and no worker's batch holding its tasks.
// Invariant: a reused slot holds no task of its previous owner anywhere in the pool. It holds:
// the previous owner pushes no more (it has exited or forgotten the slot), a batch is filled
// from the slot only under the `batching` lock and only from its deque, and under that lock the
// deque is empty and no batch holds the slot's tasks; a taker that lost a race for the last
// entry holds nothing. So the new owner starts from a slot in the state of a fresh one (the
// order promise covers one owner's tasks, and no earlier owner's task can start after them),
// and its `entered`/`accepted` counts carry on from the old ones: quiescence and statistics
// sum them. The owner's plain stores to those counts are ordered before the new owner's by
// the release store of `released` and the claimer's acquire load of it.
//
// Pool lifetime: an exiting thread may hold slots of a pool that has been destroyed. Pools
// register their producer_slots in a process-wide list under a mutex; a thread gives a slot
// back only while holding that mutex and finding its pool (by id) still listed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "queues/ws_deque.hpp"

namespace spool::detail {

class roster;

struct producer_slot {
  ws_deque deque;
  // Written only by the owning thread (plain stores): `entered` counts submissions from the
  // moment they start (quiescence), `accepted` the ones that went in (statistics).
  std::atomic<std::uint64_t> entered{0};
  std::atomic<std::uint64_t> accepted{0};

  // Whether the owner takes its tasks back (`takes_back`): it submits a task and then waits
  // for it with get() or wait(), which runs the task on the owner if no worker has taken it
  // (core::run_own_task), one trip after another. Set when the owner waits on the task it
  // submitted last (queues::take_back); cleared when it waits on an earlier one (it keeps
  // several tasks out at once: fork/join from outside the pool, a batch), and when it submits
  // again without having waited on the last one. Its submissions then defer their wake-up
  // (sleep_control::notify_worker): a worker woken for such a task would find nothing, or take
  // it and make the owner wait for a hand-off.
  // Owner only, on the line the owner writes on every submission (plain fields: a slot's next
  // owner takes them over as it does the counts).
  void owner_pushed(const work_item* t) noexcept {
    if (!waited_last) takes_back = false;
    pushed_last = t;
    waited_last = false;
  }
  void owner_waits_for(const work_item* t) noexcept {
    waited_last = t == pushed_last;
    takes_back = waited_last;
  }
  const work_item* pushed_last = nullptr;  // compared, never dereferenced
  bool waited_last = false;
  bool takes_back = false;
  // A try-lock, never waited on, held by the one worker taking a run of this slot's tasks into
  // its stolen_batch (queues::steal explains why the order needs it) as k_filling, or by an
  // outside thread for one check and at most one CAS (taking its own task back, reclaiming
  // the slot) as k_brief. What it holds tells a searcher that meets it what to do: a filler
  // notifies when it lets go, so the searcher may leave the slot to it; a brief holder does
  // not, so the searcher counts it as a lost race and looks again. Off the counters' line,
  // which the producer writes on every submission.
  static constexpr std::uint8_t k_free = 0;
  static constexpr std::uint8_t k_filling = 1;
  static constexpr std::uint8_t k_brief = 2;
  alignas(64) std::atomic<std::uint8_t> batching{k_free};
  // Takes the lock as `holder`; false, with the current holder's kind in *found, if it is held.
  bool lock_batching(std::uint8_t holder, std::uint8_t* found) noexcept {
    std::uint8_t expected = k_free;
    const bool got = batching.compare_exchange_strong(expected, holder, std::memory_order_acquire,
                                                      std::memory_order_relaxed);
    *found = expected;
    return got;
  }
  void unlock_batching() noexcept { batching.store(k_free, std::memory_order_release); }
  // The owner has given the slot back (see above); cleared by the thread that reuses it.
  std::atomic<bool> released{false};
};

class producer_slots {
 public:
  producer_slots(std::size_t count, const roster& workers);
  ~producer_slots();
  producer_slots(const producer_slots&) = delete;
  producer_slots& operator=(const producer_slots&) = delete;

  // The calling thread's slot, claimed on first use (a released, drained one first); null if
  // there are none left.
  producer_slot* mine() noexcept;
  // The calling thread's slot if it has claimed one, without claiming; null otherwise.
  producer_slot* cached() const noexcept;

  // Slots that may hold tasks: [0, in_use()).
  std::size_t in_use() const noexcept {
    std::size_t n = claimed_.load(std::memory_order_acquire);
    return n < count_ ? n : count_;
  }
  producer_slot& operator[](std::size_t i) noexcept { return slots_[i]; }
  const producer_slot& operator[](std::size_t i) const noexcept { return slots_[i]; }

  // Whether a worker's stolen batch still holds tasks taken from `slot`.
  bool held_by_batch(const producer_slot& slot) const noexcept;

  std::uint64_t id() const noexcept { return id_; }

 private:
  producer_slot* claim() noexcept;
  bool claim_released(producer_slot& slot) noexcept;

  const std::uint64_t id_;  // unique for the life of the process: thread caches key on it
  const std::size_t count_;
  const roster& workers_;
  std::unique_ptr<producer_slot[]> slots_;
  std::atomic<std::size_t> claimed_{0};
};

}  // namespace spool::detail
