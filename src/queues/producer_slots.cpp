// queues/producer_slots.cpp: claiming a slot, and the thread's cache of its slots (see
// producer_slots.hpp).
#include "queues/producer_slots.hpp"

namespace spool::detail {
namespace {

std::atomic<std::uint64_t> next_pool_id{1};

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

}  // namespace

producer_slots::producer_slots(std::size_t count)
    : id_(next_pool_id.fetch_add(1, std::memory_order_relaxed)),
      count_(count),
      slots_(count != 0 ? std::make_unique<producer_slot[]>(count) : nullptr) {}

producer_slot* producer_slots::mine() noexcept {
  for (const cached_slot& c : cache) {
    if (c.pool == id_) return c.slot;
  }
  // First submission from this thread (or its cache entry was evicted, which costs a slot).
  producer_slot* slot = nullptr;
  if (count_ != 0) {
    std::size_t i = claimed_.fetch_add(1, std::memory_order_acq_rel);
    if (i < count_) slot = &slots_[i];
  }
  cache[cache_next] = {id_, slot};
  cache_next = (cache_next + 1) % k_cache_entries;
  return slot;
}

}  // namespace spool::detail
