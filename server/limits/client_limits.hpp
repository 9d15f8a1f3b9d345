// Per-client limits (server/README.md, "Per-client limits"): open connections per client address
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
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "net.hpp"
#include "options.hpp"
#include "shared_mapping.hpp"

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

// Connection counts per client shared by processes forked after it is made (preforked's
// workers): a fixed table of 64-bit atomics in an anonymous MAP_SHARED mapping, open-addressed.
// Each word packs a 48-bit tag of the client key's hash and a 16-bit count, so a slot's owner
// and its count change together in one compare-and-swap, and a slot whose count fell to zero
// can be taken by another client. A client's slot is the first one in its probe window (8
// slots from its hash) that carries its tag with a count, else the first with none.
//
// What it does not promise, and what happens then:
//  - Two clients with the same 48-bit tag share a count (about one pair in 2^24 among 2^12
//    clients active at once).
//  - A full window (8 clients with connections open hashing near this one): the connection is
//    let in uncounted, as client_table does when it cannot list a client.
//  - Two first connections of one client racing in two processes while a slot of the window
//    empties between their scans can take two slots; the limit then holds per slot until they
//    close.
//  - A process killed while it holds counts cannot give them back itself. Each holder (a
//    preforked worker, which serves one connection at a time) publishes the one tag it holds,
//    and the supervisor calls release_holder() for a worker it reaped. A holder killed between
//    counting and publishing (two stores apart) leaks that one count.
class shared_client_counts {
 public:
  static constexpr std::size_t slot_count = 16384;  // 128 KiB of slots
  static constexpr std::size_t window = 8;

  // `holders`: processes that call set_holder(), numbered 0..holders-1. Throws
  // std::system_error if the mapping cannot be made.
  explicit shared_client_counts(std::size_t holders);
  shared_client_counts(const shared_client_counts&) = delete;
  shared_client_counts& operator=(const shared_client_counts&) = delete;

  enum class opened : std::uint8_t { counted, uncounted, refused };
  // Counts one more connection of `key`: `refused` past `max` (nothing counted), `uncounted`
  // when the window is full (close() must not follow). `holder`: the calling process's number,
  // or -1 if it does not publish what it holds.
  opened open(const client_key& key, std::size_t max, long holder) noexcept;
  void close(const client_key& key, long holder) noexcept;
  // Gives back what the (dead) holder held.
  void release_holder(std::size_t holder) noexcept;
  // The connections counted for `key` (tests, /metrics-free checks).
  [[nodiscard]] std::size_t count(const client_key& key) const noexcept;

 private:
  static std::uint64_t tag_of(const client_key& key) noexcept;
  void close_tag(std::uint64_t tag) noexcept;

  std::size_t holders_;
  // slot_count slots, then a word per holder; zero: every slot free, no holder holding anything.
  shared_array<std::atomic<std::uint64_t>> words_;
  std::atomic<std::uint64_t>* slots_;    // slot_count words: tag << 16 | count
  std::atomic<std::uint64_t>* holding_;  // per holder: the tag it holds a count of, 0 for none
};

// One connection counted for its client until release() or destruction: whoever holds the slot
// (the accepted socket, then its connection) gives it back exactly once, on every path.
class client_slot {
 public:
  client_slot() = default;
  client_slot(client_table* table, client_key key) noexcept : table_(table), key_(key) {}
  client_slot(client_slot&& o) noexcept : table_(std::exchange(o.table_, nullptr)), key_(o.key_) {}
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

  // From now on open() and the slots' release count connections in `shared` (which must
  // outlive every slot), so that processes forked after this share the limit; the buckets stay
  // per process. `holder`: this process's number in `shared`, or -1; set it in each child
  // with set_holder() after the fork.
  void share_connection_counts(shared_client_counts* shared) noexcept { shared_ = shared; }
  void set_holder(long holder) noexcept { holder_ = holder; }

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

  shared_client_counts* shared_ = nullptr;
  long holder_ = -1;
  std::size_t max_open_;
  double rate_;
  double burst_;
  std::array<shard, shard_count> shards_;
};

}  // namespace spoold
