// Where the guestbook lives: one interface, an embedded SQLite file (the default) or Redis
// (when several spoold processes share state), reached directly or through Redis Sentinel.
//
// Thread safety: every method may be called from any pool worker at once. Implementations keep
// a connection per calling thread. Calls block (disk, network); spoold runs them on the pool,
// never on an event-loop thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace spoold::store {

// One guestbook entry. `name` never contains a newline: the guestbook form refuses control
// characters in names (app/guestbook.cpp), and the Redis store relies on that to keep both
// fields in one list element, "name\nremarks" (see redis_store.cpp).
struct entry {
  std::string name;
  std::string remarks;
};

// What add_entry did with a post.
enum class added {
  stored,    // a new entry
  replayed,  // the post key was already stored: the entry it came with is the one kept
};

// The store could not be reached or failed (server down, disk error, timeout). The request
// gets 503; the next call tries again (Redis reconnects with backoff). Nothing was written.
class unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The Sentinels know no primary (none answered, or none reported one): a failover may be under
// way. Nothing was written.
class no_primary : public unavailable {
 public:
  using unavailable::unavailable;
};

// Every connection the store may hold was lent to other calls, and none came back within the
// connect timeout: the store is slower than the load (or the limit too low for it). Nothing was
// read or written. A page view is not read from a replica instead, as it is while the primary
// is down: that would open more connections under the load that caused this.
class busy : public unavailable {
 public:
  using unavailable::unavailable;
};

// A write whose outcome is not known: it reached the store, and then the confirmation that it
// is durable did not come (the connection broke before the reply, or fewer replicas than asked
// for confirmed it in time). The entry may or may not be stored; replaying the post with the
// same key is safe (add_entry recognises it).
class outcome_unknown : public unavailable {
 public:
  using unavailable::unavailable;
};

// The answer of store::check(): whether a round trip worked, and a line for /healthz (where
// the store is, or why it is down).
struct health {
  bool up = false;
  std::string detail;
};

struct page {
  std::uint64_t visitor_count = 0;  // after this visit's increment
  std::vector<entry> entries;       // oldest first, at most the last `max_entries`
  std::uint64_t total_entries = 0;
  // Read from a Redis replica while no primary could be reached: the visit was not counted
  // (visitor_count is the count as the replica has it), and the newest entries may be missing.
  bool from_replica = false;
};

class store {
 public:
  virtual ~store() = default;
  // Adds an entry; returns only once it is durable (SQLite: committed and the log fsync'ed;
  // Redis: the primary executed it, which with appendfsync always means it is in its AOF, and
  // as many replicas as asked for confirmed it). `post_key` (empty: none) is stored in the same
  // transaction as the entry: a post whose key is already stored adds nothing and returns
  // replayed, so a retried post is never stored twice. Throws unavailable (nothing written) or
  // outcome_unknown.
  virtual added add_entry(const entry& e, std::string_view post_key) = 0;
  added add_entry(const entry& e) { return add_entry(e, {}); }
  // Counts a visit (visitor_count += 1) and reads the newest entries. Throws unavailable.
  // Redis with Sentinels: while the primary cannot be reached, reads a replica instead
  // (page::from_replica), and throws only when no replica answers either.
  virtual page visit(std::size_t max_entries) = 0;
  // A cheap round trip (SQLite: a read; Redis: PING on the primary, over a connection kept for
  // checks, so a check answers while every shared connection is lent). Never throws.
  virtual health check() noexcept = 0;
  bool ping() noexcept { return check().up; }
  // "sqlite:/path/spoold.db", "redis://127.0.0.1:6379" or
  // "redis-sentinel://127.0.0.1:26379/NAME", for logs and /healthz.
  [[nodiscard]] virtual std::string describe() const = 0;
};

// The default of store_options::connections.
inline constexpr std::size_t default_store_connections = 64;

// Settings that are not part of the spec (spoold's --store-replicas options).
struct store_options {
  // Redis only: a post is acknowledged once this many replicas confirmed it (Redis WAIT), for
  // at most replica_timeout; after that it throws outcome_unknown. 0: the primary alone.
  unsigned replicas = 0;
  std::chrono::milliseconds replica_timeout{1000};
  // Redis: at most this many connections to the primary, shared by the calls of every thread
  // (at least 1; redis_options::connections). SQLite, whose connections are per thread: at most
  // this many of those of exited threads kept open for the next threads (thread_connections.hpp).
  std::size_t connections = default_store_connections;
};

// Parses "sqlite:PATH", "redis://HOST[:PORT]" (port 6379 by default) or
// "redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER" (port 26379 by default). Throws
// std::invalid_argument on a malformed spec, or on replicas asked of a SQLite store. Opening
// does not require the store to be up: a Redis server (or every Sentinel) that is down makes
// calls throw unavailable until it returns. A SQLite file that cannot be created throws
// unavailable here.
std::unique_ptr<store> open_store(std::string_view spec, const store_options& options = {});

// The two implementations, for callers (and tests) that want to set more than the spec says.

// SQLite in WAL mode; creates the file and the schema if needed. Throws unavailable if the
// file cannot be opened or created.
// `idle_connections`: store_options::connections.
std::unique_ptr<store> open_sqlite_store(const std::string& path,
                                         std::size_t idle_connections = default_store_connections);

struct redis_endpoint {
  std::string host;
  int port = 0;
  // "host:port", or "[host]:port" for an IPv6 literal.
  [[nodiscard]] std::string text() const;
  bool operator==(const redis_endpoint&) const = default;
};

struct redis_options {
  // The server, when there are no Sentinels.
  std::string host = "127.0.0.1";
  int port = 6379;
  // Redis Sentinel: when not empty, the primary of `master_name` is wherever these Sentinels
  // say it is (sentinel.hpp), checked with ROLE on every connection, and followed on a
  // failover; host and port are unused.
  std::vector<redis_endpoint> sentinels;
  std::string master_name;
  // Durable acknowledgement: see store_options.
  unsigned replicas = 0;
  std::chrono::milliseconds replica_timeout{1000};
  // Bounds on each connect and each command round trip: a server that is down or stalled
  // costs a worker at most this long, never a hang.
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{1000};
  // After a failure a thread does not try again for `backoff_initial`, doubling with each
  // further failure up to `backoff_max`; meanwhile its calls throw unavailable at once.
  std::chrono::milliseconds backoff_initial{50};
  std::chrono::milliseconds backoff_max{2000};
  // At most this many connections to the primary at once, shared by the calls of every thread;
  // a call that finds them all in use waits up to connect_timeout for one, then throws
  // unavailable. At least 1 (open_redis_store throws std::invalid_argument for 0).
  std::size_t connections = default_store_connections;
};

// The Redis forms of a store spec, "redis://HOST[:PORT]" (port 6379 by default) and
// "redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER" (port 26379 by default), as options
// (the rest left at their defaults). Throws std::invalid_argument for anything else, and for a
// malformed one, with the reason (redis_spec.cpp).
redis_options parse_redis_spec(std::string_view spec);
// Whether `spec` starts like one of those two forms (it may still be malformed).
bool is_redis_spec(std::string_view spec) noexcept;
// Throws std::invalid_argument: "store spec "SPEC": WHY (expected ...the forms...)".
[[noreturn]] void malformed_store_spec(std::string_view spec, std::string_view why);

// Redis, with ZeroHTTPd's keys: list "guestbook_remarks", counter "visitor_count" (and the
// hash "guestbook_post_keys" and counter "guestbook_replays" for post keys). Connects lazily
// (a server that is down does not make this throw). With Sentinels, starts a thread that
// watches them for +switch-master.
//
// The process must ignore SIGPIPE (spoold does): hiredis writes with write(2), and a write to
// a connection the server has closed would otherwise kill the process.
std::unique_ptr<store> open_redis_store(const redis_options& options);

}  // namespace spoold::store
