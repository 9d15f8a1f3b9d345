// queues/producer_slots.hpp: lock-free lanes for threads outside the pool.
//
// A thread outside the pool that submits to an unbounded pool gets a slot of its own on its
// first submission: a work-stealing deque that only it pushes to, and that workers steal
// from, oldest first. Submitting is then a store into the thread's own deque, with no lock
// and no line shared with other producers; a single producer's tasks still start in the order
// they were submitted. Bounded pools do not use slots: a bound needs one shared count, which
// the injector keeps.
//
// Slots are claimed for good: a slot whose thread has gone is still drained by the workers,
// it is just never pushed to again. When every slot is taken, later threads use the injector.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "queues/ws_deque.hpp"

namespace spool::detail {

struct producer_slot {
  ws_deque deque;
  // Written only by the owning thread (plain stores): `entered` counts submissions from the
  // moment they start (quiescence), `accepted` the ones that went in (statistics).
  std::atomic<std::uint64_t> entered{0};
  std::atomic<std::uint64_t> accepted{0};
  // Held by the one worker taking a run of this slot's tasks into its stolen_batch (queues::steal
  // explains why the order needs it); a try-lock, never waited on. Off the counters' line,
  // which the producer writes on every submission.
  alignas(64) std::atomic<bool> batching{false};
};

class producer_slots {
 public:
  explicit producer_slots(std::size_t count);
  producer_slots(const producer_slots&) = delete;
  producer_slots& operator=(const producer_slots&) = delete;

  // The calling thread's slot, claimed on first use; null if there are none left.
  producer_slot* mine() noexcept;

  // Slots that may hold tasks: [0, in_use()).
  std::size_t in_use() const noexcept {
    std::size_t n = claimed_.load(std::memory_order_acquire);
    return n < count_ ? n : count_;
  }
  producer_slot& operator[](std::size_t i) noexcept { return slots_[i]; }
  const producer_slot& operator[](std::size_t i) const noexcept { return slots_[i]; }

 private:
  const std::uint64_t id_;  // unique for the life of the process: thread caches key on it
  const std::size_t count_;
  std::unique_ptr<producer_slot[]> slots_;
  std::atomic<std::size_t> claimed_{0};
};

}  // namespace spool::detail
