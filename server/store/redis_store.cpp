// The guestbook in Redis, with ZeroHTTPd's keys so that both servers can share one database:
//
//   guestbook_remarks  a list, one element per entry (RPUSH), oldest first
//   visitor_count      a counter (INCR)
//
// An element is name + "\n" + remarks. Names never contain a newline (the form refuses control
// characters in names), so the first newline splits them; ZeroHTTPd stores the remarks alone,
// and an element without a newline reads as remarks with an empty name.
//
// Failure handling. Every thread has its own connection with a connect timeout and a command
// timeout, so a dead or stalled server costs a call at most one timeout, never a hang. On any
// error the connection is dropped (a pipeline with unread replies cannot be reused) and the
// thread backs off: for `backoff_initial`, doubling with each further failure up to
// `backoff_max`, its calls throw unavailable at once without touching the network. The first
// call after the backoff tries to connect again, so service resumes by itself when the server
// returns, and a server that stays down costs one refused connect per thread per backoff_max.
// Recovery is shared, in both directions, so that a server with many threads (one per
// connection, or a pool) fails and recovers as one rather than thread by thread:
//  - once any thread connects after another thread's failure, that thread's backoff is over
//    (its next call connects), so service is back in full as soon as one request found Redis up;
//  - once any thread fails, every connection made before that failure is suspect (a restarted
//    Redis has closed them all): each thread drops its own and connects afresh on its next
//    call, instead of failing one request on the dead connection first. No command is ever
//    sent twice: a call that failed is not retried.
// The two times this rests on live in a page of shared memory, so the processes of the forking
// models (forked after the store is opened) share them as the threads of one process do.
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shared_mapping.hpp"
#include "store/store.hpp"
#include "store/thread_connections.hpp"

namespace spoold::store {
namespace {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view remarks_key = "guestbook_remarks";
constexpr std::string_view counter_key = "visitor_count";

struct context_deleter {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
using context_handle = std::unique_ptr<redisContext, context_deleter>;

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_handle = std::unique_ptr<redisReply, reply_deleter>;

timeval to_timeval(milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

std::string reply_text(const redisReply& r) {
  return std::string(r.str != nullptr ? r.str : "", r.str != nullptr ? r.len : 0);
}

entry decode(const redisReply& r) {
  const std::string element = reply_text(r);
  const std::size_t newline = element.find('\n');
  if (newline == std::string::npos) return entry{"", element};  // written by ZeroHTTPd
  return entry{element.substr(0, newline), element.substr(newline + 1)};
}

// One thread's connection (absent while down) and its backoff state.
struct redis_slot final : thread_connection {
  context_handle context;
  milliseconds backoff{0};  // 0: the last attempt succeeded
  steady::time_point retry_at{};
  steady::time_point failed_at{};
  steady::time_point connected_at{};
  std::string last_error;
};

// When a thread of the store last connected, and last failed (steady_clock ticks, which are
// the same in every process of one boot); see connected_since() and failed_since().
struct shared_times {
  std::atomic<steady::rep> last_connected{std::numeric_limits<steady::rep>::min()};
  std::atomic<steady::rep> last_failed{std::numeric_limits<steady::rep>::min()};
};
static_assert(std::atomic<steady::rep>::is_always_lock_free,
              "times shared across processes need address-free atomics");

class redis_store final : public store {
 public:
  explicit redis_store(redis_options options)
      : options_(std::move(options)),
        shared_(make_shared_mapping<shared_times>("mmap (redis store)")) {
    const bool ipv6 = options_.host.find(':') != std::string::npos;
    name_ = "redis://" + (ipv6 ? "[" + options_.host + "]" : options_.host) + ":" +
            std::to_string(options_.port);
  }

  void add_entry(const entry& e) override {
    redis_slot& s = slot();
    redisContext& c = connected(s);
    const std::string element = e.name + "\n" + e.remarks;
    append(s, c, {"RPUSH", remarks_key, element});
    expect_type(s, next_reply(s, c), REDIS_REPLY_INTEGER, "RPUSH");
    s.backoff = milliseconds{0};
  }

  page visit(std::size_t max_entries) override {
    redis_slot& s = slot();
    redisContext& c = connected(s);
    // One round trip, and one atomic snapshot: total_entries matches the entries read.
    const bool want_entries = max_entries > 0;  // "LRANGE key -0 -1" would be the whole list
    const std::string first = "-" + std::to_string(std::min<std::size_t>(max_entries, INT64_MAX));
    append(s, c, {"MULTI"});
    append(s, c, {"INCR", counter_key});
    append(s, c, {"LLEN", remarks_key});
    if (want_entries) append(s, c, {"LRANGE", remarks_key, first, "-1"});
    append(s, c, {"EXEC"});

    expect_type(s, next_reply(s, c), REDIS_REPLY_STATUS, "MULTI");
    for (int queued = want_entries ? 3 : 2; queued > 0; --queued) {
      expect_type(s, next_reply(s, c), REDIS_REPLY_STATUS, "queueing in MULTI");
    }
    const reply_handle exec = next_reply(s, c);
    expect_type(s, exec, REDIS_REPLY_ARRAY, "EXEC");
    if (exec->elements != (want_entries ? 3u : 2u)) fail(s, "EXEC: unexpected number of replies");

    page p;
    p.visitor_count = integer_result(s, *exec->element[0], "INCR visitor_count");
    p.total_entries = integer_result(s, *exec->element[1], "LLEN guestbook_remarks");
    if (want_entries) {
      const redisReply& list = *exec->element[2];
      if (list.type != REDIS_REPLY_ARRAY)
        fail(s, "LRANGE guestbook_remarks: " + describe_reply(list));
      p.entries.reserve(list.elements);
      for (std::size_t i = 0; i < list.elements; ++i) p.entries.push_back(decode(*list.element[i]));
    }
    s.backoff = milliseconds{0};
    return p;
  }

  bool ping() noexcept override {
    try {
      redis_slot& s = slot();
      redisContext& c = connected(s);
      append(s, c, {"PING"});
      const reply_handle r = next_reply(s, c);
      expect_type(s, r, REDIS_REPLY_STATUS, "PING");
      s.backoff = milliseconds{0};
      return true;
    } catch (...) {
      return false;
    }
  }

  [[nodiscard]] std::string describe() const override { return name_; }

 private:
  redis_slot& slot() {
    return connections_.local<redis_slot>([] { return std::make_unique<redis_slot>(); });
  }

  // The thread's connection, connecting if it has none and is not backing off.
  redisContext& connected(redis_slot& s) {
    if (s.context) {
      if (!failed_since(s.connected_at)) return *s.context;
      s.context.reset();  // made before another thread's failure: connect afresh
    }
    const steady::time_point now = steady::now();
    if (now < s.retry_at && !connected_since(s.failed_at)) {
      const auto wait = std::chrono::ceil<milliseconds>(s.retry_at - now);
      throw unavailable(name_ + " is down (" + s.last_error + "); next attempt in " +
                        std::to_string(wait.count()) + " ms");
    }
    context_handle c(redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                             to_timeval(options_.connect_timeout)));
    if (!c) fail(s, "connect: out of memory");
    if (c->err != 0) fail(s, "connect: " + std::string(c->errstr));
    if (redisSetTimeout(c.get(), to_timeval(options_.command_timeout)) != REDIS_OK) {
      fail(s, "setting the command timeout: " + std::string(c->errstr));
    }
    s.context = std::move(c);
    s.connected_at = steady::now();
    note(shared_->last_connected, s.connected_at);
    return *s.context;
  }

  // Whether some thread connected (failed) after `t`. Relaxed: these are hints that end a
  // backoff early or retire a connection early, and order nothing else.
  [[nodiscard]] bool connected_since(steady::time_point t) const noexcept {
    return shared_->last_connected.load(std::memory_order_relaxed) > t.time_since_epoch().count();
  }
  [[nodiscard]] bool failed_since(steady::time_point t) const noexcept {
    return shared_->last_failed.load(std::memory_order_relaxed) > t.time_since_epoch().count();
  }

  // Raises `latest` to `t` (it only moves forward).
  static void note(std::atomic<steady::rep>& latest, steady::time_point t) noexcept {
    const steady::rep ticks = t.time_since_epoch().count();
    steady::rep seen = latest.load(std::memory_order_relaxed);
    while (seen < ticks && !latest.compare_exchange_weak(seen, ticks, std::memory_order_relaxed)) {
    }
  }

  // Drops the connection, starts or lengthens the backoff and throws.
  [[noreturn]] void fail(redis_slot& s, const std::string& what) {
    s.context.reset();
    s.backoff = s.backoff.count() == 0 ? options_.backoff_initial
                                       : std::min(s.backoff * 2, options_.backoff_max);
    s.failed_at = steady::now();
    s.retry_at = s.failed_at + s.backoff;
    note(shared_->last_failed, s.failed_at);
    s.last_error = what;
    throw unavailable(name_ + ": " + what);
  }

  void append(redis_slot& s, redisContext& c, std::initializer_list<std::string_view> args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    argv.reserve(args.size());
    lengths.reserve(args.size());
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    if (redisAppendCommandArgv(&c, static_cast<int>(argv.size()), argv.data(), lengths.data()) !=
        REDIS_OK) {
      fail(s, "queueing a command: " + std::string(c.errstr));
    }
  }

  reply_handle next_reply(redis_slot& s, redisContext& c) {
    void* raw = nullptr;
    if (redisGetReply(&c, &raw) != REDIS_OK || raw == nullptr) {
      fail(s, std::string(c.err != 0 ? c.errstr : "no reply"));
    }
    return reply_handle(static_cast<redisReply*>(raw));
  }

  void expect_type(redis_slot& s, const reply_handle& r, int type, const char* command) {
    if (r->type != type) fail(s, std::string(command) + ": " + describe_reply(*r));
  }

  std::uint64_t integer_result(redis_slot& s, const redisReply& r, const char* command) {
    if (r.type != REDIS_REPLY_INTEGER || r.integer < 0) {
      fail(s, std::string(command) + ": " + describe_reply(r));
    }
    return static_cast<std::uint64_t>(r.integer);
  }

  static std::string describe_reply(const redisReply& r) {
    if (r.type == REDIS_REPLY_ERROR) return reply_text(r);
    return "unexpected reply of type " + std::to_string(r.type);
  }

  redis_options options_;
  std::string name_;
  shared_mapping<shared_times> shared_;
  thread_connections connections_;
};

}  // namespace

std::unique_ptr<store> open_redis_store(const redis_options& options) {
  return std::make_unique<redis_store>(options);
}

}  // namespace spoold::store
