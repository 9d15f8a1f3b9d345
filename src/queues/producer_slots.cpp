// queues/producer_slots.cpp: claiming a slot, giving it back, and the thread's cache of its
// slots (see producer_slots.hpp).
#include "queues/producer_slots.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#include "worker/worker.hpp"

namespace spool::detail {
namespace {

std::atomic<std::uint64_t> next_pool_id{1};

// The pools alive now, for exiting threads (see producer_slots.hpp, "Pool lifetime"). Never
// destroyed: a thread may exit after static destructors have run.
struct registry {
  std::mutex mu;
  std::vector<producer_slots*> live;  // guarded by mu
};
registry& pools() noexcept {
  // Out of memory at the first use ends the process (noexcept).
  static registry* r = new registry;  // NOLINT(bugprone-unhandled-exception-at-new)
  return *r;
}

// A thread remembers its slot in the last few pools it submitted to. Keyed by pool id, not
// address, so a new pool at a dead one's address is never mistaken for it. An entry can hold
// a null slot: "this pool had none left", so the thread does not ask again.
struct cached_slot {
  std::uint64_t pool = 0;
  producer_slot* slot = nullptr;
};
constexpr std::size_t k_cache_entries = 4;
// initial-exec: read on every submission (src/README.md, "Thread-local storage").
[[gnu::tls_model("initial-exec")]] thread_local cached_slot cache[k_cache_entries];
[[gnu::tls_model("initial-exec")]] thread_local std::size_t cache_next = 0;

// Gives `c`'s slot back if its pool still lives.
void give_back(const cached_slot& c) noexcept {
  if (c.slot == nullptr) return;
  registry& r = pools();
  std::lock_guard lock(r.mu);
  for (producer_slots* s : r.live) {
    if (s->id() == c.pool) {
      c.slot->released.store(true, std::memory_order_release);
      return;
    }
  }
}

// The exit hook: touched only when the thread claims a slot (off the submission path), it
// gives every cached slot back when the thread exits.
struct slot_releaser {
  bool armed = false;
  ~slot_releaser() {
    if (!armed) return;
    for (cached_slot& c : cache) {
      give_back(c);
      c = {};
    }
  }
};
thread_local slot_releaser releaser;

}  // namespace

producer_slots::producer_slots(std::size_t count, const roster& workers)
    : id_(next_pool_id.fetch_add(1, std::memory_order_relaxed)),
      count_(count),
      workers_(workers),
      slots_(count != 0 ? std::make_unique<producer_slot[]>(count) : nullptr) {
  if (count_ == 0) return;
  registry& r = pools();
  std::lock_guard lock(r.mu);
  r.live.push_back(this);  // may throw bad_alloc: the pool's constructor fails
}

producer_slots::~producer_slots() {
  if (count_ == 0) return;
  registry& r = pools();
  std::lock_guard lock(r.mu);
  r.live.erase(std::find(r.live.begin(), r.live.end(), this));
}

producer_slot* producer_slots::cached() const noexcept {
  for (const cached_slot& c : cache) {
    if (c.pool == id_) return c.slot;
  }
  return nullptr;
}

producer_slot* producer_slots::mine() noexcept {
  for (const cached_slot& c : cache) {
    if (c.pool == id_) return c.slot;
  }
  // First submission from this thread (or its cache entry was evicted).
  producer_slot* slot = claim();
  cached_slot& entry = cache[cache_next];
  give_back(entry);  // the evicted pool's slot: this thread will not push to it again
  entry = {id_, slot};
  cache_next = (cache_next + 1) % k_cache_entries;
  if (slot != nullptr) releaser.armed = true;
  return slot;
}

producer_slot* producer_slots::claim() noexcept {
  if (count_ == 0) return nullptr;
  for (std::size_t i = 0, n = in_use(); i < n; ++i) {
    if (slots_[i].released.load(std::memory_order_relaxed) && claim_released(slots_[i])) {
      return &slots_[i];
    }
  }
  std::size_t i = claimed_.fetch_add(1, std::memory_order_acq_rel);
  return i < count_ ? &slots_[i] : nullptr;
}

bool producer_slots::claim_released(producer_slot& slot) noexcept {
  // Under the batching lock no batch is being filled from the slot (producer_slots.hpp).
  std::uint8_t held;
  if (!slot.lock_batching(producer_slot::k_brief, &held)) return false;
  bool claimed = false;
  if (slot.released.load(std::memory_order_acquire) && slot.deque.empty() && !held_by_batch(slot)) {
    slot.released.store(false, std::memory_order_relaxed);
    claimed = true;
  }
  slot.unlock_batching();
  return claimed;
}

bool producer_slots::held_by_batch(const producer_slot& slot) const noexcept {
  for (const auto& w : workers_.all()) {
    if (!w->batch.empty() && w->batch.source() == &slot) return true;
  }
  return false;
}

}  // namespace spool::detail
