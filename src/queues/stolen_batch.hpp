// queues/stolen_batch.hpp: a run of tasks a worker took from a producer slot in one go, which
// it and every other worker then take one at a time, oldest first.
//
// Why: taking a producer's tasks one by one costs a CAS on the slot's top and a read of the
// lines the producer is writing (its bottom index, the ring) for every task. Taking up to
// k_capacity at once pays that once per run. But a run held privately would break what slots
// promise: one producer's tasks start in submission order, and none waits behind a task that
// blocks. So the run is not private: the worker that took it (the holder) and any thief both
// take from its front, so the order is kept and a blocked holder holds nothing back.
//
// Only the holder fills the batch, and only when it is empty; everyone (holder included) takes
// with a CAS on `head_`. Indices only grow (no ABA): the holder writes entries
// [tail, tail + n) and then publishes them with a release store of `tail_`; a taker reads
// `head_`, `tail_`, the entry, and claims it by moving `head_` on by one. An entry is
// overwritten only by a later fill, which needs the batch empty (head == tail), so a taker that
// read an entry at an index since passed fails its CAS and discards what it read.
//
// `source_` names the slot the entries came from; queues::steal uses it to keep the order
// across batches (see there).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "queues/ws_deque.hpp"
#include "spool/detail/work_item.hpp"

namespace spool::detail {

class stolen_batch {
 public:
  static constexpr std::uint32_t k_capacity = 32;

  // As a steal from a deque: the item, or nullptr with `retry` set if the batch was not empty
  // but another thread won the race.
  using take_result = ws_deque::steal_result;

  // Holder only, and only when empty (the holder saw it empty; takers only shrink it).
  void fill(const void* source, work_item* const* items, std::uint32_t n) noexcept {
    const std::int64_t t = tail_.load(std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < n; ++i) {
      items_[static_cast<std::size_t>(t + i) % k_capacity].store(items[i],
                                                                 std::memory_order_relaxed);
    }
    source_.store(source, std::memory_order_relaxed);
    tail_.store(t + n, std::memory_order_release);
    if (n > 0) __builtin_prefetch(items[0]);  // the next to be taken (see take())
  }

  // Any thread. The oldest entry.
  take_result take() noexcept {
    std::int64_t h = head_.load(std::memory_order_acquire);
    const std::int64_t t = tail_.load(std::memory_order_acquire);
    if (h >= t) return {nullptr, false};
    work_item* item =
        items_[static_cast<std::size_t>(h) % k_capacity].load(std::memory_order_relaxed);
    if (!head_.compare_exchange_strong(h, h + 1, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
      return {nullptr, true};
    }
    // The next entry's task was written by its producer on another core: start moving it here
    // while this one runs. An entry past the tail is a stale address; a prefetch never faults.
    __builtin_prefetch(
        items_[static_cast<std::size_t>(h + 1) % k_capacity].load(std::memory_order_relaxed));
    return {item, false};
  }

  // Any thread; snapshots that may be stale by the time they are used.
  std::size_t size() const noexcept {
    const std::int64_t t = tail_.load(std::memory_order_acquire);
    const std::int64_t h = head_.load(std::memory_order_acquire);
    return t > h ? static_cast<std::size_t>(t - h) : 0;
  }
  bool empty() const noexcept { return size() == 0; }
  // Where the entries came from; meaningful while the batch is not empty (read it after a
  // size() that found entries: the acquire load of tail_ there makes the fill's source visible).
  const void* source() const noexcept { return source_.load(std::memory_order_relaxed); }

 private:
  alignas(64) std::atomic<std::int64_t> head_{0};
  alignas(64) std::atomic<std::int64_t> tail_{0};
  std::atomic<const void*> source_{nullptr};
  std::atomic<work_item*> items_[k_capacity] = {};
};

}  // namespace spool::detail
