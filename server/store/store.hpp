// Where the guestbook lives: one interface, an embedded SQLite file (the default) or Redis
// (when several spoold processes share state).
//
// Thread safety: every method may be called from any pool worker at once. Implementations keep
// a connection per calling thread. Calls block (disk, network); spoold runs them on the pool,
// never on an event-loop thread.
#pragma once

#include <chrono>
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

// The store could not be reached or failed (server down, disk error, timeout). The request
// gets 503; the next call tries again (Redis reconnects with backoff).
class unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct page {
  std::uint64_t visitor_count = 0;  // after this visit's increment
  std::vector<entry> entries;       // oldest first, at most the last `max_entries`
  std::uint64_t total_entries = 0;
};

class store {
 public:
  virtual ~store() = default;
  // Adds an entry; returns only once it is durable (SQLite: committed and the log fsync'ed;
  // Redis: the server acknowledged RPUSH). Throws unavailable.
  virtual void add_entry(const entry& e) = 0;
  // Counts a visit (visitor_count += 1) and reads the newest entries. Throws unavailable.
  virtual page visit(std::size_t max_entries) = 0;
  // A cheap round trip (SQLite: a read; Redis: PING). false when down; never throws.
  virtual bool ping() noexcept = 0;
  // "sqlite:/path/spoold.db" or "redis://127.0.0.1:6379", for logs and /healthz.
  [[nodiscard]] virtual std::string describe() const = 0;
};

// Parses "sqlite:PATH" or "redis://HOST:PORT" (port defaults to 6379). Throws
// std::invalid_argument on a malformed spec. Opening does not require the store to be up:
// a Redis server that is down makes calls throw unavailable until it returns. A SQLite file
// that cannot be created throws unavailable here.
std::unique_ptr<store> open_store(std::string_view spec);

// The two implementations, for callers (and tests) that want to set more than the spec says.

// SQLite in WAL mode; creates the file and the schema if needed. Throws unavailable if the
// file cannot be opened or created.
std::unique_ptr<store> open_sqlite_store(const std::string& path);

struct redis_options {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Bounds on each connect and each command round trip: a server that is down or stalled
  // costs a worker at most this long, never a hang.
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{1000};
  // After a failure a thread does not try again for `backoff_initial`, doubling with each
  // further failure up to `backoff_max`; meanwhile its calls throw unavailable at once.
  std::chrono::milliseconds backoff_initial{50};
  std::chrono::milliseconds backoff_max{2000};
};

// Redis, with ZeroHTTPd's keys: list "guestbook_remarks", counter "visitor_count". Connects
// lazily (a server that is down does not make this throw).
//
// The process must ignore SIGPIPE (spoold does): hiredis writes with write(2), and a write to
// a connection the server has closed would otherwise kill the process.
std::unique_ptr<store> open_redis_store(const redis_options& options);

}  // namespace spoold::store
