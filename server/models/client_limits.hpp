// Per-client limits (README.md, "Per-client limits"): open connections per client address
// (--max-connections-per-client) and a token bucket of requests per client address
// (--rate-limit, --rate-burst). A client is an IPv4 address, or an IPv6 address by its /64 (a
// host commonly gets a whole /64, so counting single IPv6 addresses would limit nothing); a
// v4-mapped IPv6 peer counts as its IPv4 address.
//
// One table per process, shared by every thread and loop of it, split into shards each with its
// own mutex, so two clients rarely contend. An entry lives while its client has a connection
// open or a bucket that is not full; a shard sweeps the others when it has doubled since its
// last sweep, so memory follows the clients active now, not every client ever seen.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "net.hpp"
#include "options.hpp"

namespace spoold {

struct client_key {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;
  friend bool operator==(const client_key&, const client_key&) = default;
};

// An IPv4 address whole; an IPv6 address by its /64.
client_key client_key_of(const ip_address& a) noexcept;

// True if `a` is in a --trust range: exempt from the limits.
bool is_trusted(const options& o, const ip_address& a) noexcept;

class client_table;

// One connection counted for its client until release() or destruction: whoever holds the slot
// (the accepted socket, then its connection) gives it back exactly once, on every path.
class client_slot {
 public:
  client_slot() = default;
  client_slot(client_table* table, client_key key) noexcept : table_(table), key_(key) {}
  client_slot(client_slot&& o) noexcept
      : table_(std::exchange(o.table_, nullptr)), key_(o.key_) {}
  client_slot& operator=(client_slot&& o) noexcept {
    if (this != &o) {
      release();
      table_ = std::exchange(o.table_, nullptr);
      key_ = o.key_;
    }
    return *this;
  }
  ~client_slot() { release(); }

  void release() noexcept;

 private:
  client_table* table_ = nullptr;
  client_key key_;
};

class client_table {
 public:
  using clock = std::chrono::steady_clock;

  // `max_open`: connections per client, 0 for no limit. `rate`: requests per second, 0 for no
  // limit; `burst`: the bucket's size.
  client_table(std::size_t max_open, double rate, std::uint32_t burst);
  client_table(const client_table&) = delete;
  client_table& operator=(const client_table&) = delete;

  // Counts one more connection of `key`. False past the limit (nothing counted). A client that
  // cannot be listed for want of memory is let in uncounted: the slot then holds nothing.
  bool open(const client_key& key, client_slot& slot) noexcept;
  // Takes a token of `key`'s bucket: 0 if there was one, else the seconds until there is one
  // (rounded up, at least 1).
  std::uint32_t take_token(const client_key& key, clock::time_point now) noexcept;

 private:
  friend class client_slot;
  void close(const client_key& key) noexcept;

  struct entry {
    std::size_t open = 0;
    double tokens = 0;
    clock::time_point refilled{};
  };
  struct key_hash {
    std::size_t operator()(const client_key& k) const noexcept;
  };
  struct alignas(64) shard {
    std::mutex mu;
    std::unordered_map<client_key, entry, key_hash> entries;  // guarded by mu
    std::size_t sweep_at = 64;                                // guarded by mu
  };
  static constexpr std::size_t shard_count = 64;

  shard& shard_of(const client_key& key) noexcept;
  // `key`'s entry, listed with a full bucket if new. Throws std::bad_alloc.
  entry& find_locked(shard& s, const client_key& key, clock::time_point now);
  // The bucket refilled up to `now`.
  void refill(entry& e, clock::time_point now) const noexcept;
  [[nodiscard]] bool idle(const entry& e, clock::time_point now) const noexcept;
  void sweep_locked(shard& s, clock::time_point now) noexcept;

  std::size_t max_open_;
  double rate_;
  double burst_;
  std::array<shard, shard_count> shards_;
};

}  // namespace spoold
