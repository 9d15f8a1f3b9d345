// The guestbook in Redis, with ZeroHTTPd's keys so that both servers can share one database:
//
//   guestbook_remarks    a list, one element per entry (RPUSH), oldest first
//   visitor_count        a counter (INCR)
//   guestbook_post_keys  a hash: one field per post key stored, so a replayed post is known
//   guestbook_replays    a counter of replayed posts (see add_script for why it exists)
//
// An element is name + "\n" + remarks. Names never contain a newline (the form refuses control
// characters in names), so the first newline splits them; ZeroHTTPd stores the remarks alone,
// and an element without a newline reads as remarks with an empty name.
//
// Where the server is. With redis:// it is one address. With redis-sentinel:// it is the
// primary the Sentinels name (sentinel.hpp), asked afresh for every new connection and checked
// with ROLE once connected, so a connection never goes to a replica. A connection is dropped,
// and its thread asks again, after a connection error, after a READONLY reply (the instance was
// demoted under it; nothing was written, so that one command is sent again to the new primary),
// and once the Sentinels announce +switch-master. An address that cannot be used (no connection,
// or not a primary) makes the next question go to another Sentinel first. Only writes on the
// primary are acknowledged.
//
// Reads while the primary is away. A page view counts the visit (INCR) on the primary. While
// no primary can be reached (a failover, or this node cut off from it) the page is read from a
// replica the Sentinels see up, on a connection each thread keeps until the primary answers
// again: the visit is not counted and the newest entries may be missing (the replica lags, or
// was cut off too), which the page says. Posts are never sent to a replica.
//
// Durability of a post. With appendfsync always the primary writes its AOF and fsyncs it
// before it replies, so an acknowledged entry survives a crash of the primary. A failover,
// though, promotes a replica that may not have it yet, and the old primary then rejoins as a
// replica of the new one and discards what the new one lacks. With `replicas` K > 0 each post
// is therefore followed by WAIT K: it is acknowledged only once K replicas hold it, and if they
// do not confirm it within replica_timeout the call throws outcome_unknown (it is on the
// primary, and may or may not survive a failover). The post key makes a retry safe either way.
//
// Connections. The primary's connections are shared by the calls of every thread: a call
// borrows one (or the right to make one) for its duration and gives it back at its end, when it
// waits idle for the next call, so that the store holds as many connections as calls run at
// once, at most `connections`. A call that finds them all lent waits for one to come back, for
// at most connect_timeout, then throws busy (store.hpp), and a page view that gets busy is not
// read from a replica instead. One connection per thread instead would make a server with a
// thread per client (the threaded model) open and close one per request and keep thousands
// open: a burst of connects overflows Redis's listen queue (511 by default), and the connects
// whose SYN it drops time out; thousands of threads would pass its maxclients.
// What a thread keeps of its own is its slot: its backoff, and its replica connection.
// The health check (check(), for /healthz) has one more connection of its own, outside the
// `connections`: a server whose connections are all lent under load would otherwise report
// the store down, and a balancer would take a loaded node out of rotation, while the check is
// meant to tell whether the primary answers.
// Invariant: lent_ + idle_.size() <= connections, under pool_mu_; a connection is used by one
// call at a time, and the mutex orders its hand-over between threads. The forking models fork
// only from threads that never call the store (forking.cpp), so a child starts with no
// connection lent or idle, and none for its checks.
//
// Failure handling. Every connection has a connect timeout and a command timeout, so a dead or
// stalled server costs a call at most one timeout, never a hang. On any error the connection is
// dropped (a pipeline with unread replies cannot be reused) and the calling thread backs off:
// for `backoff_initial`, doubling with each further failure up to `backoff_max`, its calls that
// would have to connect throw unavailable at once without touching the network. The first call
// after the backoff tries to connect again, so service resumes by itself when the server
// returns, and a server that stays down costs one refused connect per thread per backoff_max.
// Recovery is shared, in both directions, so that a server with many threads (one per
// connection, or a pool) fails and recovers as one rather than thread by thread:
//  - once any thread connects after another thread's failure, that thread's backoff is over
//    (its next call connects), so service is back in full as soon as one request found Redis up;
//  - once any call fails, every connection made before that failure is suspect (a restarted
//    Redis has closed them all): the call that borrows one drops it and connects afresh,
//    instead of failing one request on the dead connection first. No command is ever sent
//    twice, but for one refused with READONLY, which did nothing.
//  - once the primary moves (+switch-master, or a READONLY), every connection made before is
//    dropped and every backoff ends: the next call of each thread goes to the new primary.
// The times this rests on live in a page of shared memory, so the processes of the forking
// models (forked after the store is opened) share them as the threads of one process do.
#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "shared_mapping.hpp"
#include "store/redis_handles.hpp"
#include "store/sentinel.hpp"
#include "store/store.hpp"
#include "store/thread_connections.hpp"

namespace spoold::store {
namespace {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view remarks_key = "guestbook_remarks";
constexpr std::string_view counter_key = "visitor_count";
constexpr std::string_view post_keys_key = "guestbook_post_keys";
constexpr std::string_view replays_key = "guestbook_replays";

// Adds one entry, atomically with its post key (KEYS: remarks, post keys, replays; ARGV:
// element, post key or ""). Returns 1 when stored, 0 for a replay. A replay still writes (the
// counter): WAIT counts the replicas that have everything this connection wrote, and without a
// write of its own a replay would be confirmed even while the original post, made on another
// connection, has not reached them yet.
constexpr std::string_view add_script =
    "if ARGV[2] ~= '' and redis.call('HSETNX', KEYS[2], ARGV[2], '1') == 0 then\n"
    "  redis.call('INCR', KEYS[3])\n"
    "  return 0\n"
    "end\n"
    "redis.call('RPUSH', KEYS[1], ARGV[1])\n"
    "return 1\n";

entry decode(const redisReply& r) {
  const std::string element = reply_text(r);
  const std::size_t newline = element.find('\n');
  if (newline == std::string::npos) return entry{"", element};  // written by ZeroHTTPd
  return entry{element.substr(0, newline), element.substr(newline + 1)};
}

bool is_readonly(const redisReply& r) {
  return r.type == REDIS_REPLY_ERROR && reply_text(r).starts_with("READONLY");
}

// What a failure means for the caller; chooses the exception thrown.
enum class failure { unavailable, no_primary, outcome_unknown };

// The instance answered READONLY: it is a replica now. Thrown and caught inside a call.
struct demoted {
  std::string what;
};

// One thread's backoff state, and the connection lent to its call (absent between calls and
// while down).
struct redis_slot final : thread_connection {
  context_handle context;
  redis_endpoint at;        // where `context` is connected
  context_handle replica;   // for reads while no primary can be reached (see visit())
  milliseconds backoff{0};  // 0: the last attempt succeeded
  steady::time_point retry_at{};
  steady::time_point failed_at{};
  steady::time_point connected_at{};
  std::string last_error;
  failure last_failure = failure::unavailable;
};

// When a thread of the store last connected, last failed, and last learned that the primary
// moved (steady_clock ticks, which are the same in every process of one boot); see
// connected_since(), failed_since() and moved_since().
struct shared_times {
  std::atomic<steady::rep> last_connected{std::numeric_limits<steady::rep>::min()};
  std::atomic<steady::rep> last_failed{std::numeric_limits<steady::rep>::min()};
  std::atomic<steady::rep> last_moved{std::numeric_limits<steady::rep>::min()};
};
static_assert(std::atomic<steady::rep>::is_always_lock_free,
              "times shared across processes need address-free atomics");

class redis_store final : public store {
 public:
  explicit redis_store(redis_options options)
      : options_(std::move(options)),
        fixed_{options_.host, options_.port},
        replicas_text_(std::to_string(options_.replicas)),
        replica_timeout_text_(std::to_string(options_.replica_timeout.count())),
        shared_(make_shared_mapping<shared_times>("mmap (redis store)")),
        connections_(0) {  // a thread's slot is its own: none is kept for another
    // WAIT blocks for up to replica_timeout: the round trip's timeout must outlast it.
    command_timeout_ = options_.command_timeout +
                       (options_.replicas > 0 ? options_.replica_timeout : milliseconds{0});
    if (options_.sentinels.empty()) {
      name_ = "redis://" + fixed_.text();
      return;
    }
    sentinel_ = std::make_unique<sentinel_client>(options_.sentinels, options_.master_name,
                                                  options_.connect_timeout);
    name_ = "redis-sentinel://" + sentinel_->describe();
    sentinel_->watch([this](const redis_endpoint& now) {
      note(shared_->last_moved, steady::now());
      std::fprintf(stderr, "spoold: %s: the primary is now %s (+switch-master)\n", name_.c_str(),
                   now.text().c_str());
    });
  }

  using store::add_entry;

  added add_entry(const entry& e, std::string_view post_key) override {
    const std::string element = e.name + "\n" + e.remarks;
    return on_primary([&](redis_slot& s, redisContext& c) {
      append(s, c,
             {"EVAL", add_script, "3", remarks_key, post_keys_key, replays_key, element, post_key});
      if (options_.replicas > 0) append(s, c, {"WAIT", replicas_text_, replica_timeout_text_});
      // A connection the server has closed (it restarted, or dropped its clients in a
      // failover) would take the command and answer nothing: then it surely stored nothing.
      if (closed_by_server(c)) fail(s, s.at.text() + ": the server closed the connection");
      send(s, c);

      // From here on the script may have run: a lost reply leaves the outcome unknown.
      const reply_handle eval = next(s, c, failure::outcome_unknown);
      check_not_readonly(s, *eval);
      if (eval->type == REDIS_REPLY_ERROR) fail(s, "EVAL (add entry): " + reply_text(*eval));
      if (eval->type != REDIS_REPLY_INTEGER) {
        fail(s, "EVAL (add entry): " + describe_reply(*eval), failure::outcome_unknown);
      }
      const added result = eval->integer == 1 ? added::stored : added::replayed;
      if (options_.replicas == 0) return result;

      const reply_handle wait = next(s, c, failure::outcome_unknown);
      if (wait->type != REDIS_REPLY_INTEGER) {
        fail(s, "WAIT: " + describe_reply(*wait), failure::outcome_unknown);
      }
      if (wait->integer < static_cast<long long>(options_.replicas)) {
        throw outcome_unknown(name_ + ": the entry reached the primary " + s.at.text() + ", but " +
                              std::to_string(wait->integer) + " of " + replicas_text_ +
                              " replicas confirmed it within " + replica_timeout_text_ + " ms");
      }
      return result;
    });
  }

  page visit(std::size_t max_entries) override {
    try {
      page p = on_primary([&](redis_slot& s, redisContext& c) {
        // One round trip, and one atomic snapshot: total_entries matches the entries read.
        if (!queue_page_commands(c, "INCR", max_entries)) {
          fail(s, "queueing a command: " + std::string(c.errstr));
        }
        expect_type(s, next(s, c), REDIS_REPLY_STATUS, "MULTI");
        for (int queued = max_entries > 0 ? 3 : 2; queued > 0; --queued) {
          expect_type(s, next(s, c), REDIS_REPLY_STATUS, "queueing in MULTI");
        }
        const reply_handle exec = next(s, c);
        expect_type(s, exec, REDIS_REPLY_ARRAY, "EXEC");
        page read;
        if (std::string why = page_from(*exec, max_entries > 0, read); !why.empty()) {
          fail(s, why);
        }
        return read;
      });
      slot().replica.reset();  // the primary answers again
      return p;
    } catch (const busy&) {
      throw;  // the primary answers; it is the load (store.hpp)
    } catch (const unavailable&) {
      if (std::optional<page> p = visit_replica(max_entries)) return std::move(*p);
      throw;
    }
  }

  // On the check's own connection (Connections, at the top of the file), so that a server
  // whose shared connections are all lent still learns whether the primary answers.
  health check() noexcept override {
    try {
      const std::lock_guard lock(check_mu_);
      return run_on(check_slot_, [&](redis_slot& s, redisContext& c) {
        append(s, c, {"PING"});
        expect_type(s, next(s, c), REDIS_REPLY_STATUS, "PING");
        return health{true, "primary " + s.at.text()};
      });
    } catch (const std::exception& e) {
      return health{false, e.what()};
    }
  }

  [[nodiscard]] std::string describe() const override { return name_; }

 private:
  redis_slot& slot() {
    return connections_.local<redis_slot>([] { return std::make_unique<redis_slot>(); });
  }

  // Queues MULTI, `counter` (INCR or GET) of the visitor count, LLEN and (max_entries > 0)
  // LRANGE of the newest entries, and EXEC. False when a command cannot be queued.
  static bool queue_page_commands(redisContext& c, std::string_view counter,
                                  std::size_t max_entries) {
    bool queued = append_command(c, {"MULTI"}) && append_command(c, {counter, counter_key}) &&
                  append_command(c, {"LLEN", remarks_key});
    if (queued && max_entries > 0) {  // "LRANGE key -0 -1" would be the whole list
      const std::string first = "-" + std::to_string(std::min<std::size_t>(max_entries, INT64_MAX));
      queued = append_command(c, {"LRANGE", remarks_key, first, "-1"});
    }
    return queued && append_command(c, {"EXEC"});
  }

  // The page from EXEC's replies to queue_page_commands(); "" or what was wrong with them.
  static std::string page_from(const redisReply& exec, bool want_entries, page& p) {
    if (exec.elements != (want_entries ? 3u : 2u)) return "EXEC: unexpected number of replies";
    const redisReply& count = *exec.element[0];
    if (count.type == REDIS_REPLY_INTEGER && count.integer >= 0) {
      p.visitor_count = static_cast<std::uint64_t>(count.integer);
    } else if (count.type == REDIS_REPLY_STRING) {  // GET, on a replica
      const std::string text = reply_text(count);
      const auto [end, ec] =
          std::from_chars(text.data(), text.data() + text.size(), p.visitor_count);
      if (ec != std::errc() || end != text.data() + text.size()) {
        return "GET visitor_count: not a number";
      }
    } else if (count.type != REDIS_REPLY_NIL) {  // nil: no visit counted yet
      return "visitor_count: " + describe_reply(count);
    }
    const redisReply& total = *exec.element[1];
    if (total.type != REDIS_REPLY_INTEGER || total.integer < 0) {
      return "LLEN guestbook_remarks: " + describe_reply(total);
    }
    p.total_entries = static_cast<std::uint64_t>(total.integer);
    if (!want_entries) return "";
    const redisReply& list = *exec.element[2];
    if (list.type != REDIS_REPLY_ARRAY) return "LRANGE guestbook_remarks: " + describe_reply(list);
    p.entries.reserve(list.elements);
    for (std::size_t i = 0; i < list.elements; ++i) p.entries.push_back(decode(*list.element[i]));
    return "";
  }

  // A page read from a replica while no primary can be reached (see the top of the file);
  // nullopt when none answers. The thread keeps its replica connection for the next such read
  // and drops it on any error (then tries once more, afresh).
  std::optional<page> visit_replica(std::size_t max_entries) {
    if (!sentinel_) return std::nullopt;
    redis_slot& s = slot();
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!s.replica) s.replica = connect_replica();
      if (!s.replica) return std::nullopt;
      if (std::optional<page> p = read_replica(*s.replica, max_entries)) return p;
      s.replica.reset();
    }
    return std::nullopt;
  }

  // A connection to the first replica the Sentinels see up that takes one; nullptr if none.
  context_handle connect_replica() {
    std::vector<redis_endpoint> replicas;
    try {
      replicas = sentinel_->replicas();
    } catch (const no_primary&) {
      return nullptr;
    }
    for (const redis_endpoint& at : replicas) {
      std::string error;
      context_handle c = connect_with_timeouts(at.host, at.port, options_.connect_timeout,
                                               options_.command_timeout, error);
      if (c) return c;
    }
    return nullptr;
  }

  // The page, without counting the visit (a replica takes no writes); nullopt on any error.
  static std::optional<page> read_replica(redisContext& c, std::size_t max_entries) {
    if (!queue_page_commands(c, "GET", max_entries)) return std::nullopt;
    for (int replies = max_entries > 0 ? 4 : 3; replies > 0; --replies) {  // +OK, +QUEUED...
      const reply_handle r = next_reply(c);
      if (!r || r->type != REDIS_REPLY_STATUS) return std::nullopt;
    }
    const reply_handle exec = next_reply(c);
    page p;
    if (!exec || exec->type != REDIS_REPLY_ARRAY || !page_from(*exec, max_entries > 0, p).empty()) {
      return std::nullopt;
    }
    p.from_replica = true;
    return p;
  }

  // Runs f(slot, connection) on the primary. If the instance turns out to be a replica
  // (READONLY: nothing was done), connects to the primary again and runs f once more.
  template <class F>
  std::invoke_result_t<F&, redis_slot&, redisContext&> on_primary(F&& f) {
    redis_slot& s = slot();
    borrow(s);
    const lent_connection give_back{*this, s};
    return run_on(s, f);
  }

  // on_primary() on the connection `s` holds (or makes), which the caller has to itself.
  template <class F>
  std::invoke_result_t<F&, redis_slot&, redisContext&> run_on(redis_slot& s, F&& f) {
    for (int attempt = 0;; ++attempt) {
      redisContext& c = connected(s);
      try {
        auto result = f(s, c);
        s.backoff = milliseconds{0};
        return result;
      } catch (const demoted& d) {
        if (attempt > 0) fail(s, d.what);
      }
    }
  }

  // Lends the slot the right to hold one connection to the primary for a call, with an idle
  // connection if one is left (Connections, at the top of the file). While all `connections`
  // are lent, waits for one to come back, for at most connect_timeout; then throws.
  void borrow(redis_slot& s) {
    std::unique_lock lock(pool_mu_);
    const bool free = pool_returned_.wait_for(lock, options_.connect_timeout, [&] {
      return !idle_.empty() || lent_ + idle_.size() < options_.connections;
    });
    if (!free) {
      throw busy(name_ + ": all " + std::to_string(options_.connections) +
                 " connections busy for " + std::to_string(options_.connect_timeout.count()) +
                 " ms");
    }
    ++lent_;
    if (idle_.empty()) return;
    idle_connection& c = idle_.back();
    s.context = std::move(c.context);
    s.at = std::move(c.at);
    s.connected_at = c.connected_at;
    idle_.pop_back();
  }

  // Ends a call's loan: the slot's connection, unless a failure dropped it, waits idle for the
  // next call.
  void put_back(redis_slot& s) noexcept {
    context_handle closing;  // closed outside the lock
    {
      std::lock_guard lock(pool_mu_);
      --lent_;
      if (s.context) {
        try {
          if (idle_.size() == idle_.capacity()) {
            idle_.reserve(std::max<std::size_t>(8, 2 * idle_.size()));
          }
          idle_.push_back(idle_connection{std::move(s.context), std::move(s.at), s.connected_at});
        } catch (const std::bad_alloc&) {  // from reserve, before anything moved: closed instead
          closing = std::move(s.context);
        }
      }
    }
    pool_returned_.notify_one();
  }

  // Gives the slot's connection back when a call ends, however it ends.
  struct lent_connection {
    redis_store& store;
    redis_slot& slot;
    lent_connection(redis_store& st, redis_slot& sl) : store(st), slot(sl) {}
    lent_connection(const lent_connection&) = delete;
    lent_connection& operator=(const lent_connection&) = delete;
    ~lent_connection() { store.put_back(slot); }
  };

  // The call's connection, connecting if it has none and the thread is not backing off.
  redisContext& connected(redis_slot& s) {
    if (s.context) {
      if (!failed_since(s.connected_at) && !moved_since(s.connected_at)) return *s.context;
      s.context.reset();  // made before another thread's failure, or a move: connect afresh
    }
    const steady::time_point now = steady::now();
    if (now < s.retry_at && !connected_since(s.failed_at) && !moved_since(s.failed_at)) {
      const auto wait = std::chrono::ceil<milliseconds>(s.retry_at - now);
      const std::string what = name_ + " is down (" + s.last_error + "); next attempt in " +
                               std::to_string(wait.count()) + " ms";
      if (s.last_failure == failure::no_primary) throw no_primary(what);
      throw unavailable(what);
    }
    redis_endpoint at = fixed_;
    if (sentinel_) {
      try {
        at = sentinel_->primary();
      } catch (const no_primary& e) {
        fail(s, e.what(), failure::no_primary);
      }
    }
    std::string error;
    context_handle c =
        connect_with_timeouts(at.host, at.port, options_.connect_timeout, command_timeout_, error);
    if (!c) {
      if (sentinel_) sentinel_->primary_failed();
      fail(s, at.text() + ": " + error);
    }
    if (sentinel_) check_role(s, *c, at);
    s.context = std::move(c);
    s.at = std::move(at);
    s.connected_at = steady::now();
    note(shared_->last_connected, s.connected_at);
    return *s.context;
  }

  // The Sentinels named `at`; make sure it is a primary before anything is written to it.
  void check_role(redis_slot& s, redisContext& c, const redis_endpoint& at) {
    if (!append_command(c, {"ROLE"})) fail(s, at.text() + ": queueing ROLE: out of memory");
    std::string wrong;
    if (const reply_handle r = next_reply(c); !r) {
      wrong = at.text() + ": ROLE: " + std::string(c.errstr);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
               r->element[0]->type != REDIS_REPLY_STRING) {
      wrong = at.text() + ": ROLE: " + describe_reply(*r);
    } else if (const std::string role = reply_text(*r->element[0]); role != "master") {
      wrong = at.text() + " is not a primary (its role is " + role +
              "); the Sentinels have not caught up yet";
    }
    if (wrong.empty()) return;
    sentinel_->primary_failed();
    fail(s, wrong);
  }

  // Whether some thread connected (failed, learned of a move) after `t`. Relaxed: these are
  // hints that end a backoff early or retire a connection early, and order nothing else.
  [[nodiscard]] bool connected_since(steady::time_point t) const noexcept {
    return shared_->last_connected.load(std::memory_order_relaxed) > t.time_since_epoch().count();
  }
  [[nodiscard]] bool failed_since(steady::time_point t) const noexcept {
    return shared_->last_failed.load(std::memory_order_relaxed) > t.time_since_epoch().count();
  }
  [[nodiscard]] bool moved_since(steady::time_point t) const noexcept {
    return shared_->last_moved.load(std::memory_order_relaxed) > t.time_since_epoch().count();
  }

  // Raises `latest` to `t` (it only moves forward).
  static void note(std::atomic<steady::rep>& latest, steady::time_point t) noexcept {
    const steady::rep ticks = t.time_since_epoch().count();
    steady::rep seen = latest.load(std::memory_order_relaxed);
    while (seen < ticks && !latest.compare_exchange_weak(seen, ticks, std::memory_order_relaxed)) {
    }
  }

  // Drops the connection, starts or lengthens the backoff and throws.
  [[noreturn]] void fail(redis_slot& s, const std::string& what,
                         failure kind = failure::unavailable) {
    s.context.reset();
    s.backoff = s.backoff.count() == 0 ? options_.backoff_initial
                                       : std::min(s.backoff * 2, options_.backoff_max);
    s.failed_at = steady::now();
    s.retry_at = s.failed_at + s.backoff;
    note(shared_->last_failed, s.failed_at);
    s.last_error = what;
    s.last_failure = kind;
    const std::string message = name_ + ": " + what;
    switch (kind) {
      case failure::no_primary:
        throw no_primary(message);
      case failure::outcome_unknown:
        throw outcome_unknown(message);
      case failure::unavailable:
        break;
    }
    throw unavailable(message);
  }

  // A READONLY reply: the instance was demoted. Drop the connection, tell every thread that
  // the primary moved, and let on_primary try the new one.
  void check_not_readonly(redis_slot& s, const redisReply& r) {
    if (!is_readonly(r)) return;
    std::string what = s.at.text() + ": " + reply_text(r);
    s.context.reset();
    note(shared_->last_moved, steady::now());
    throw demoted{std::move(what)};
  }

  void append(redis_slot& s, redisContext& c, std::initializer_list<std::string_view> args) {
    if (!append_command(c, args)) fail(s, "queueing a command: " + std::string(c.errstr));
  }

  // Whether the server has closed the connection (its FIN or RST has arrived).
  static bool closed_by_server(const redisContext& c) {
    pollfd p{c.fd, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

  // Writes what is queued. A write(2) that fails sends nothing, so a failure on the first one
  // means the server got none of it (a dead connection: nothing was stored); after a partial
  // write it may have got a whole command.
  void send(redis_slot& s, redisContext& c) {
    int done = 0;
    for (bool first = true; done == 0; first = false) {
      if (redisBufferWrite(&c, &done) != REDIS_OK) {
        fail(s, "sending: " + std::string(c.errstr),
             first ? failure::unavailable : failure::outcome_unknown);
      }
    }
  }

  reply_handle next(redis_slot& s, redisContext& c, failure kind = failure::unavailable) {
    reply_handle r = next_reply(c);
    if (!r) fail(s, std::string(c.err != 0 ? c.errstr : "no reply"), kind);
    return r;
  }

  void expect_type(redis_slot& s, const reply_handle& r, int type, const char* command) {
    check_not_readonly(s, *r);
    if (r->type != type) fail(s, std::string(command) + ": " + describe_reply(*r));
  }

  redis_options options_;
  redis_endpoint fixed_;
  std::string replicas_text_;
  std::string replica_timeout_text_;
  milliseconds command_timeout_{};
  std::string name_;
  shared_mapping<shared_times> shared_;
  // After shared_: destroyed first, so the watcher thread (which notes moves in shared_) has
  // stopped before shared_ goes away.
  std::unique_ptr<sentinel_client> sentinel_;
  thread_connections connections_;
  // The connections to the primary (Connections, at the top of the file): lent_ are lent to
  // calls, idle_ wait for the next (the last one given back on top); lent_ + idle_.size() <=
  // options_.connections.
  struct idle_connection {
    context_handle context;
    redis_endpoint at;
    steady::time_point connected_at;
  };
  std::mutex pool_mu_;
  std::condition_variable pool_returned_;
  std::size_t lent_ = 0;
  std::vector<idle_connection> idle_;
  // The health check's connection and backoff, outside the pool: one check at a time.
  std::mutex check_mu_;
  redis_slot check_slot_;
};

}  // namespace

std::unique_ptr<store> open_redis_store(const redis_options& options) {
  if (options.connections == 0) {
    throw std::invalid_argument("redis store: connections must be at least 1");
  }
  return std::make_unique<redis_store>(options);
}

}  // namespace spoold::store
