// queues/ws_deque.hpp: a worker's own task deque (Chase-Lev, as corrected for weak memory models by
// Le, Pop, Cohen and Zappa Nardelli, PPoPP 2013).
//
// The owner pushes and pops at the bottom (LIFO: the newest task, whose data is hot in cache,
// runs first); any thread steals from the top (FIFO: the oldest task, usually the biggest
// piece of a divide-and-conquer split). Only the last element is contended: owner and thief
// race for it with a CAS on `top_`.
//
// Memory ordering: the paper's version uses relaxed accesses plus seq_cst fences in pop() and
// steal(). Here those index accesses are seq_cst operations instead. On x86-64 this compiles
// to the same instructions (a seq_cst store is the xchg the fence would have cost; seq_cst
// loads are plain loads), and ThreadSanitizer, which does not model fences, can then check it.
// The Dekker-style argument: pop() stores bottom then loads top; steal() loads top then
// bottom; all four are in the single seq_cst order, so they cannot both miss each other and
// both take the last element. The CAS on top_ settles the remaining race.
//
// Growth: the ring doubles when full. Thieves may still read the old ring, so old rings are
// kept (owner-only list) until the deque dies; a slot in an old ring is never overwritten
// after growth, because the owner writes only to the newest ring.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "spool/detail/work_item.hpp"

namespace spool::detail {

class ws_deque {
 public:
  explicit ws_deque(std::int64_t capacity = 256) : ring_(new ring(capacity)) {}
  ~ws_deque() { delete ring_.load(std::memory_order_relaxed); }
  ws_deque(const ws_deque&) = delete;
  ws_deque& operator=(const ws_deque&) = delete;

  // Owner only. Throws std::bad_alloc if the ring must grow and cannot.
  void push(work_item* t) {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);
    ring* r = ring_.load(std::memory_order_relaxed);
    // top_ only grows, so a stale copy overstates the size: look at the real one (a line the
    // thieves write) only when the copy says the ring is full.
    if (b - top_seen_ > r->mask) {
      top_seen_ = top_.load(std::memory_order_acquire);
      if (b - top_seen_ > r->mask) r = grow(r, top_seen_, b);
    }
    r->put(b, t);
    bottom_.store(b + 1, std::memory_order_release);
  }

  // Owner only. The newest task, or nullptr if empty.
  work_item* pop() noexcept {
    std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    ring* r = ring_.load(std::memory_order_relaxed);
    bottom_.store(b, std::memory_order_seq_cst);
    std::int64_t tp = top_.load(std::memory_order_seq_cst);
    if (tp > b) {  // was empty
      bottom_.store(b + 1, std::memory_order_relaxed);
      return nullptr;
    }
    work_item* t = r->get(b);
    if (tp == b) {  // the last element: race the thieves for it
      if (!top_.compare_exchange_strong(tp, tp + 1, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
        t = nullptr;
      }
      bottom_.store(b + 1, std::memory_order_relaxed);
    }
    return t;
  }

  struct steal_result {
    work_item* item;  // nullptr if nothing was taken
    bool retry;       // the deque was not empty but another thread won the race: try again
  };

  // Any thread. The oldest task.
  steal_result steal() noexcept {
    std::int64_t tp = top_.load(std::memory_order_seq_cst);
    std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    if (tp >= b) return {nullptr, false};
    ring* r = ring_.load(std::memory_order_acquire);
    work_item* t = r->get(tp);
    if (!top_.compare_exchange_strong(tp, tp + 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
      return {nullptr, true};
    }
    // A thief that found a backlog usually comes back for the next task, which was written on
    // another core and is likely out of this one's cache: start loading it now. The slot may
    // be stale or reused by then; a prefetch never faults, so a wrong guess costs nothing.
    if (tp + 1 < b) __builtin_prefetch(r->get(tp + 1));
    return {t, false};
  }

  // Any thread: whether `expected` is the oldest task now (a snapshot; steal_if decides).
  bool oldest_is(const work_item* expected) const noexcept {
    const std::int64_t tp = top_.load(std::memory_order_acquire);
    const std::int64_t b = bottom_.load(std::memory_order_acquire);
    return tp < b && ring_.load(std::memory_order_acquire)->get(tp) == expected;
  }

  // Any thread: steals the oldest task only if it is `expected`. True if this call took it.
  // Comparing the pointer read from the ring is enough: the caller keeps `expected` alive
  // (its future holds the allocation), so no other task can have that address meanwhile.
  bool steal_if(const work_item* expected) noexcept {
    std::int64_t tp = top_.load(std::memory_order_seq_cst);
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    if (tp >= b) return false;
    ring* r = ring_.load(std::memory_order_acquire);
    if (r->get(tp) != expected) return false;
    return top_.compare_exchange_strong(tp, tp + 1, std::memory_order_seq_cst,
                                        std::memory_order_relaxed);
  }

  struct steal_batch_result {
    std::uint32_t count;  // tasks written to `out`, oldest first; 0 if none were taken
    bool retry;           // as for steal()
  };

  // Any thread, but only on a deque whose owner never pops (a producer slot): up to `max` of
  // the oldest tasks with one CAS. With a popping owner this would be wrong: the owner takes
  // its last element without a CAS whenever top is below it, so it could take one that a
  // batch, claimed by a thief that read the older bottom, also covers.
  steal_batch_result steal_batch(work_item** out, std::uint32_t max) noexcept {
    std::int64_t tp = top_.load(std::memory_order_seq_cst);
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    if (tp >= b) return {0, false};
    const auto n = static_cast<std::uint32_t>(b - tp < max ? b - tp : max);
    ring* r = ring_.load(std::memory_order_acquire);
    for (std::uint32_t i = 0; i < n; ++i) out[i] = r->get(tp + i);
    if (!top_.compare_exchange_strong(tp, tp + n, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
      return {0, true};
    }
    return {n, false};
  }

  // Any thread; a snapshot that may be stale by the time it is used.
  std::size_t size() const noexcept {
    std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    std::int64_t tp = top_.load(std::memory_order_seq_cst);
    return b > tp ? static_cast<std::size_t>(b - tp) : 0;
  }
  bool empty() const noexcept { return size() == 0; }

 private:
  struct ring {
    explicit ring(std::int64_t capacity)
        : mask(capacity - 1),
          slots(new std::atomic<work_item*>[static_cast<std::size_t>(capacity)]) {}
    // Slots are atomics because a thief may read a slot that the owner is about to reuse;
    // the thief then loses the CAS and discards what it read.
    work_item* get(std::int64_t i) const noexcept {
      return slots[i & mask].load(std::memory_order_relaxed);
    }
    void put(std::int64_t i, work_item* t) noexcept {
      slots[i & mask].store(t, std::memory_order_relaxed);
    }
    std::int64_t mask;
    std::unique_ptr<std::atomic<work_item*>[]> slots;
  };

  ring* grow(ring* old, std::int64_t tp, std::int64_t b) {
    auto bigger = std::make_unique<ring>((old->mask + 1) * 2);
    for (std::int64_t i = tp; i < b; ++i) bigger->put(i, old->get(i));
    retired_.reserve(retired_.size() + 1);
    retired_.emplace_back(old);
    ring* r = bigger.release();
    ring_.store(r, std::memory_order_release);
    return r;
  }

  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  alignas(64) std::atomic<ring*> ring_;
  std::vector<std::unique_ptr<ring>> retired_;  // owner only
  std::int64_t top_seen_ = 0;                   // owner only: top_ as last read by push()
};

}  // namespace spool::detail
