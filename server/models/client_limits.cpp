#include "models/client_limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

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

}  // namespace spoold
