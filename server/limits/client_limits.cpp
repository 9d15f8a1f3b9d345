#include "limits/client_limits.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <system_error>

namespace spoold {

client_key client_key_of(const ip_address& a) noexcept {
  client_key k;
  std::memcpy(&k.hi, a.bytes.data(), 8);
  if (a.is_v4()) std::memcpy(&k.lo, a.bytes.data() + 8, 8);
  return k;
}

bool is_trusted(const options& o, const ip_address& a) noexcept {
  return std::any_of(o.trust.begin(), o.trust.end(),
                     [&](const ip_range& r) { return r.contains(a); });
}

void client_slot::release() noexcept {
  if (table_ == nullptr) return;
  std::exchange(table_, nullptr)->close(key_);
}

client_table::client_table(std::size_t max_open, double rate, std::uint32_t burst)
    : max_open_(max_open), rate_(rate), burst_(burst) {}

std::size_t client_table::key_hash::operator()(const client_key& k) const noexcept {
  std::uint64_t h = (k.hi ^ (k.lo * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

client_table::shard& client_table::shard_of(const client_key& key) noexcept {
  // The hash's high bits pick the shard, its low bits the bucket inside the shard's map.
  return shards_[(key_hash{}(key) >> 58) % shard_count];
}

void client_table::refill(entry& e, clock::time_point now) const noexcept {
  // `now` may be a little older than the last refill (read before another thread's, which took
  // the lock first): then there is nothing to add, and the later time stands.
  const std::chrono::duration<double> elapsed = now - e.refilled;
  if (elapsed.count() <= 0) return;
  e.tokens = std::min(burst_, e.tokens + elapsed.count() * rate_);
  e.refilled = now;
}

bool client_table::idle(const entry& e, clock::time_point now) const noexcept {
  if (e.open > 0) return false;
  if (rate_ == 0) return true;
  const std::chrono::duration<double> elapsed = now - e.refilled;
  return e.tokens + elapsed.count() * rate_ >= burst_;
}

void client_table::sweep_locked(shard& s, clock::time_point now) noexcept {
  std::erase_if(s.entries, [&](const auto& kv) { return idle(kv.second, now); });
  s.sweep_at = std::max<std::size_t>(64, s.entries.size() * 2);
}

client_table::entry& client_table::find_locked(shard& s, const client_key& key,
                                               clock::time_point now) {
  if (s.entries.size() >= s.sweep_at) sweep_locked(s, now);
  auto [it, fresh] = s.entries.try_emplace(key);
  if (fresh) {
    it->second.tokens = burst_;
    it->second.refilled = now;
  }
  return it->second;
}

bool client_table::open(const client_key& key, client_slot& slot) noexcept {
  if (max_open_ == 0) return true;
  if (shared_ != nullptr) {
    switch (shared_->open(key, max_open_, holder_)) {
      case shared_client_counts::opened::refused:
        return false;
      case shared_client_counts::opened::uncounted:
        return true;  // the slot holds nothing
      case shared_client_counts::opened::counted:
        break;
    }
    slot = client_slot(this, key);
    return true;
  }
  shard& s = shard_of(key);
  std::lock_guard lock(s.mu);
  try {
    entry& e = find_locked(s, key, clock::now());
    if (e.open >= max_open_) return false;
    ++e.open;
  } catch (const std::bad_alloc&) {
    return true;
  }
  slot = client_slot(this, key);
  return true;
}

void client_table::close(const client_key& key) noexcept {
  if (shared_ != nullptr) {
    shared_->close(key, holder_);
    return;
  }
  shard& s = shard_of(key);
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(key);
  if (it == s.entries.end()) return;  // never: a slot's entry lives while it is open
  --it->second.open;
  if (idle(it->second, clock::now())) s.entries.erase(it);
}

std::uint32_t client_table::take_token(const client_key& key, clock::time_point now) noexcept {
  if (rate_ == 0) return 0;
  shard& s = shard_of(key);
  std::lock_guard lock(s.mu);
  entry* e = nullptr;
  try {
    e = &find_locked(s, key, now);
  } catch (const std::bad_alloc&) {
    return 0;  // a client that cannot be listed is not limited
  }
  refill(*e, now);
  if (e->tokens >= 1) {
    e->tokens -= 1;
    return 0;
  }
  const double wait = std::ceil((1 - e->tokens) / rate_);
  return static_cast<std::uint32_t>(std::max(1.0, wait));
}

// ---------------------------------------------------------------------------------------------
// shared_client_counts
//
// Invariant: a slot's word is tag << 16 | count; count > 0 means that many connections of the
// tag's client are open, and only a slot with count 0 changes owner (its tag is then stale and
// means nothing). Every change is one compare-and-swap of the whole word, so a count is never
// moved to another client by a concurrent claim. Relaxed order suffices: the words order
// nothing else, and each is only ever read-modify-written as a whole.

namespace {

constexpr std::uint64_t count_mask = 0xffff;

std::uint64_t count_of(std::uint64_t word) noexcept { return word & count_mask; }
std::uint64_t tag_in(std::uint64_t word) noexcept { return word >> 16; }

}  // namespace

shared_client_counts::shared_client_counts(std::size_t holders)
    : holders_(holders),
      words_(slot_count + holders, "mmap (shared client counts)"),
      slots_(words_.data()),
      holding_(slots_ + slot_count) {
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
}

std::uint64_t shared_client_counts::tag_of(const client_key& key) noexcept {
  std::uint64_t h = (key.hi ^ (key.lo * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 29;
  const std::uint64_t tag = h >> 16;
  return tag == 0 ? 1 : tag;  // 0 marks "holds nothing" in holding_
}

shared_client_counts::opened shared_client_counts::open(const client_key& key, std::size_t max,
                                                        long holder) noexcept {
  const std::uint64_t tag = tag_of(key);
  const std::size_t home = tag % slot_count;
  const std::uint64_t limit = std::min<std::uint64_t>(max, count_mask);
  for (;;) {
    std::size_t free_slot = slot_count;
    std::uint64_t free_word = 0;
    bool retry = false;
    for (std::size_t i = 0; i < window; ++i) {
      std::atomic<std::uint64_t>& slot = slots_[(home + i) % slot_count];
      std::uint64_t word = slot.load(std::memory_order_relaxed);
      if (count_of(word) > 0 && tag_in(word) == tag) {
        for (;;) {
          if (count_of(word) >= limit) return opened::refused;
          if (slot.compare_exchange_weak(word, word + 1, std::memory_order_relaxed)) {
            if (holder >= 0) holding_[holder].store(tag, std::memory_order_relaxed);
            return opened::counted;
          }
          // Changed under us: still ours with a count, or emptied and maybe reused.
          if (count_of(word) == 0 || tag_in(word) != tag) {
            retry = true;
            break;
          }
        }
        break;
      }
      if (count_of(word) == 0 && free_slot == slot_count) {
        free_slot = (home + i) % slot_count;
        free_word = word;
      }
    }
    if (retry) continue;
    if (free_slot == slot_count) return opened::uncounted;  // a full window
    if (slots_[free_slot].compare_exchange_strong(free_word, (tag << 16) | 1,
                                                  std::memory_order_relaxed)) {
      if (holder >= 0) holding_[holder].store(tag, std::memory_order_relaxed);
      return opened::counted;
    }
    // Another process took that slot first (maybe for this client): look again.
  }
}

void shared_client_counts::close_tag(std::uint64_t tag) noexcept {
  const std::size_t home = tag % slot_count;
  for (std::size_t i = 0; i < window; ++i) {
    std::atomic<std::uint64_t>& slot = slots_[(home + i) % slot_count];
    std::uint64_t word = slot.load(std::memory_order_relaxed);
    while (count_of(word) > 0 && tag_in(word) == tag) {
      if (slot.compare_exchange_weak(word, word - 1, std::memory_order_relaxed)) return;
    }
  }
  // Not found: never, for a connection open() counted (its count keeps the slot its own).
}

void shared_client_counts::close(const client_key& key, long holder) noexcept {
  if (holder >= 0) holding_[holder].store(0, std::memory_order_relaxed);
  close_tag(tag_of(key));
}

void shared_client_counts::release_holder(std::size_t holder) noexcept {
  if (holder >= holders_) return;
  const std::uint64_t tag = holding_[holder].exchange(0, std::memory_order_relaxed);
  if (tag != 0) close_tag(tag);
}

std::size_t shared_client_counts::count(const client_key& key) const noexcept {
  const std::uint64_t tag = tag_of(key);
  const std::size_t home = tag % slot_count;
  std::size_t n = 0;
  for (std::size_t i = 0; i < window; ++i) {
    const std::uint64_t word = slots_[(home + i) % slot_count].load(std::memory_order_relaxed);
    if (count_of(word) > 0 && tag_in(word) == tag) n += count_of(word);
  }
  return n;
}

}  // namespace spoold
