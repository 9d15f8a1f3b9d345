#include "app/metrics.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "shared_mapping.hpp"

namespace spoold {
namespace {

constexpr int first_code = 100;
constexpr int code_count = 500;  // 100..599

// One thread's counters. Only its thread adds (relaxed: nothing is ordered by them); readers
// sum every shard. A shard outlives its thread so no count is lost when a thread ends; a new
// thread reuses a retired shard, so a thread-per-connection server does not grow without bound.
struct alignas(64) shard {
  std::array<std::atomic<std::uint64_t>, code_count> by_code{};
  std::atomic<std::uint64_t> other_codes{0};  // outside 100..599 (never expected)
  std::atomic<std::uint64_t> bytes_sent{0};
  std::atomic<std::uint64_t> opened{0};
  std::atomic<std::uint64_t> closed{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> accepts_exhausted{0};
  std::atomic<std::uint64_t> loop_yields{0};
  std::atomic<std::uint64_t> refused_per_client{0};
  std::atomic<std::uint64_t> rate_limited{0};
  std::atomic<std::uint64_t> proxy_header_errors{0};
  std::atomic<std::uint64_t> store_errors{0};
  std::atomic<std::uint64_t> post_replays{0};
  std::atomic<std::uint64_t> tls_full{0};
  std::atomic<std::uint64_t> tls_resumed{0};
  std::array<std::atomic<std::uint64_t>, tls_failure_reasons> tls_failures{};
  std::array<std::atomic<std::uint64_t>, shed_states> shed{};
};

void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
  c.fetch_add(n, std::memory_order_relaxed);
}

std::uint64_t load(const std::atomic<std::uint64_t>& c) {
  return c.load(std::memory_order_relaxed);
}

// Retired shards kept for new threads to reuse; past this many, a retiring shard is folded into
// the registry's first shard and freed, so that a wave of thousands of connection threads
// (the threaded models) does not leave thousands of 4 KiB shards behind for good.
constexpr std::size_t kept_retired = 64;

// The shards of one metrics object. Threads hold it weakly: a thread that ends after the
// metrics object is gone has nothing to hand back.
struct shard_registry {
  std::mutex mu;
  // all[0] is no thread's: it holds the counts of folded shards.
  std::vector<std::unique_ptr<shard>> all = make_first();
  std::vector<shard*> retired;  // shards whose thread has ended

  static std::vector<std::unique_ptr<shard>> make_first() {
    std::vector<std::unique_ptr<shard>> v;
    v.push_back(std::make_unique<shard>());
    return v;
  }

  // A thread ended: its shard is kept for reuse, or folded and freed. Under mu, so a reader
  // (for_each) sees its counts exactly once either way.
  void retire_locked(shard* s) {
    if (retired.size() < kept_retired) {
      retired.push_back(s);
      return;
    }
    shard& into = *all.front();
    for (std::size_t i = 0; i < s->by_code.size(); ++i) bump(into.by_code[i], load(s->by_code[i]));
    bump(into.other_codes, load(s->other_codes));
    bump(into.bytes_sent, load(s->bytes_sent));
    bump(into.opened, load(s->opened));
    bump(into.closed, load(s->closed));
    bump(into.refused, load(s->refused));
    bump(into.accepts_exhausted, load(s->accepts_exhausted));
    bump(into.loop_yields, load(s->loop_yields));
    bump(into.refused_per_client, load(s->refused_per_client));
    bump(into.rate_limited, load(s->rate_limited));
    bump(into.proxy_header_errors, load(s->proxy_header_errors));
    bump(into.store_errors, load(s->store_errors));
    bump(into.post_replays, load(s->post_replays));
    bump(into.tls_full, load(s->tls_full));
    bump(into.tls_resumed, load(s->tls_resumed));
    for (std::size_t i = 0; i < s->tls_failures.size(); ++i) {
      bump(into.tls_failures[i], load(s->tls_failures[i]));
    }
    for (std::size_t i = 0; i < s->shed.size(); ++i) bump(into.shed[i], load(s->shed[i]));
    std::erase_if(all, [s](const std::unique_ptr<shard>& p) { return p.get() == s; });
  }

  shard* take() {
    std::lock_guard lock(mu);
    if (!retired.empty()) {
      shard* s = retired.back();
      retired.pop_back();
      return s;
    }
    all.push_back(std::make_unique<shard>());
    return all.back().get();
  }
};

// A thread's shards, one per metrics object it has recorded into. Objects are told apart by a
// never-reused id rather than their address, which a later object may get again.
class thread_shards {
 public:
  thread_shards() = default;
  thread_shards(const thread_shards&) = delete;
  thread_shards& operator=(const thread_shards&) = delete;

  ~thread_shards() {
    for (entry& e : entries_) {
      if (std::shared_ptr<shard_registry> reg = e.registry.lock()) {
        std::lock_guard lock(reg->mu);
        reg->retire_locked(e.s);
      }
    }
  }

  shard* find(std::uint64_t id) {
    for (entry& e : entries_) {
      if (e.id == id) return e.s;
    }
    return nullptr;
  }

  shard* add(std::uint64_t id, const std::shared_ptr<shard_registry>& reg) {
    // Entries for objects that no longer exist are dropped here, off the hot path.
    std::erase_if(entries_, [](const entry& e) { return e.registry.expired(); });
    shard* s = reg->take();
    entries_.push_back(entry{id, s, reg});
    return s;
  }

 private:
  struct entry {
    std::uint64_t id;
    shard* s;
    std::weak_ptr<shard_registry> registry;
  };
  std::vector<entry> entries_;
};

thread_local thread_shards this_thread_shards;
std::atomic<std::uint64_t> next_metrics_id{1};

void append_u64(std::string& out, std::uint64_t v) {
  char buf[24];
  int n = std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
  out.append(buf, static_cast<std::size_t>(n));
}

// One metric family with a single sample: "# HELP", "# TYPE", "name{labels} value" (`labels`
// is "" or a label set with its braces).
void family(std::string& out, std::string_view name, std::string_view type, std::string_view labels,
            std::string_view help, std::uint64_t value) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
  out += name;
  out += labels;
  out += ' ';
  append_u64(out, value);
  out += '\n';
}

void json_field(std::string& out, std::string_view name, std::uint64_t value) {
  out += '"';
  out += name;
  out += "\":";
  append_u64(out, value);
}

}  // namespace

struct metrics::impl {
  std::uint64_t id = next_metrics_id.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<shard_registry> registry = std::make_shared<shard_registry>();
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::string node;         // --node-name, "" for none
  std::string node_labels;  // {node="NAME"} or ""
  // share_across_processes(): the one shard every thread of every process counts into, in a
  // MAP_SHARED mapping that forked children inherit. Its atomics are lock-free, so they work
  // across processes. Set once, before any fork or count; never unset until destruction.
  shared_mapping<shard> shared;

  shard& mine() {
    if (shared) return *shared;
    shard* s = this_thread_shards.find(id);
    if (s == nullptr) s = this_thread_shards.add(id, registry);
    return *s;
  }

  // Calls f(shard) for every shard, under the registry's lock (shards are added, and folded
  // away, under it too).
  template <class F>
  void for_each(F&& f) const {
    if (shared) f(*shared);
    std::lock_guard lock(registry->mu);
    for (const auto& s : registry->all) f(*s);
  }
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "shared-memory counters need address-free (lock-free) atomics");

metrics::metrics() : impl_(new impl) {}
metrics::~metrics() { delete impl_; }

void metrics::record_response(int status, std::uint64_t bytes) noexcept {
  shard& s = impl_->mine();
  if (status >= first_code && status < first_code + code_count) {
    bump(s.by_code[static_cast<std::size_t>(status - first_code)]);
  } else {
    bump(s.other_codes);
  }
  bump(s.bytes_sent, bytes);
}

void metrics::connection_opened() noexcept { bump(impl_->mine().opened); }
void metrics::connection_closed() noexcept { bump(impl_->mine().closed); }
void metrics::connection_refused() noexcept { bump(impl_->mine().refused); }
void metrics::accept_exhausted() noexcept { bump(impl_->mine().accepts_exhausted); }
void metrics::loop_yielded() noexcept { bump(impl_->mine().loop_yields); }
void metrics::connection_refused_per_client() noexcept { bump(impl_->mine().refused_per_client); }
void metrics::request_rate_limited() noexcept { bump(impl_->mine().rate_limited); }
void metrics::proxy_header_error() noexcept { bump(impl_->mine().proxy_header_errors); }
void metrics::store_error() noexcept { bump(impl_->mine().store_errors); }
void metrics::post_replayed() noexcept { bump(impl_->mine().post_replays); }
void metrics::tls_handshake_done(bool resumed) noexcept {
  shard& s = impl_->mine();
  bump(resumed ? s.tls_resumed : s.tls_full);
}
void metrics::tls_handshake_failed(std::size_t reason) noexcept {
  if (reason < tls_failure_reasons) bump(impl_->mine().tls_failures[reason]);
}
void metrics::connection_shed(std::size_t state) noexcept {
  if (state < shed_states) bump(impl_->mine().shed[state]);
}

void metrics::set_node_name(std::string name) {
  impl_->node_labels = name.empty() ? std::string() : "{node=\"" + name + "\"}";
  impl_->node = std::move(name);
}

void metrics::share_across_processes() {
  if (impl_->shared) return;
  impl_->shared = make_shared_mapping<shard>("mmap (shared metrics)");
}

metrics_snapshot metrics::snapshot() const {
  metrics_snapshot out;
  std::uint64_t opened = 0;
  std::uint64_t closed = 0;
  impl_->for_each([&](const shard& s) {
    for (std::size_t i = 0; i < s.by_code.size(); ++i) {
      std::uint64_t n = load(s.by_code[i]);
      out.by_status[(i + first_code) / 100] += n;
      out.requests += n;
    }
    out.requests += load(s.other_codes);
    out.bytes_sent += load(s.bytes_sent);
    opened += load(s.opened);
    closed += load(s.closed);
    out.connections_refused += load(s.refused);
    out.accepts_exhausted += load(s.accepts_exhausted);
    out.loop_yields += load(s.loop_yields);
    out.refused_per_client += load(s.refused_per_client);
    out.rate_limited += load(s.rate_limited);
    out.proxy_header_errors += load(s.proxy_header_errors);
    out.store_errors += load(s.store_errors);
    out.post_replays += load(s.post_replays);
    out.tls_resumed += load(s.tls_resumed);
    out.tls_handshakes += load(s.tls_full) + load(s.tls_resumed);
    for (std::size_t i = 0; i < tls_failure_reasons; ++i) {
      out.tls_failures[i] += load(s.tls_failures[i]);
    }
    for (std::size_t i = 0; i < shed_states; ++i) out.connections_shed[i] += load(s.shed[i]);
  });
  out.connections_accepted = opened;
  // The shards are read one after another, so a close may be seen without its open.
  out.connections_open = opened > closed ? opened - closed : 0;
  return out;
}

std::uint64_t metrics::count_for(int status) const {
  if (status < first_code || status >= first_code + code_count) return 0;
  std::uint64_t n = 0;
  auto i = static_cast<std::size_t>(status - first_code);
  impl_->for_each([&](const shard& s) { n += load(s.by_code[i]); });
  return n;
}

std::string metrics::prometheus(const spool::stats& pool) const {
  std::array<std::uint64_t, code_count> codes{};
  impl_->for_each([&](const shard& s) {
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] += load(s.by_code[i]);
  });
  metrics_snapshot snap = snapshot();
  const std::string& labels = impl_->node_labels;

  std::string out;
  out.reserve(4096);
  out += "# HELP spoold_requests_total HTTP responses sent, by status code.\n";
  out += "# TYPE spoold_requests_total counter\n";
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] == 0) continue;
    out += "spoold_requests_total{code=\"";
    append_u64(out, i + first_code);
    out += '"';
    if (!impl_->node.empty()) out += ",node=\"" + impl_->node + '"';
    out += "} ";
    append_u64(out, codes[i]);
    out += '\n';
  }
  auto uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->started);
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "spoold_uptime_seconds%s %.3f\n",
                        impl_->node_labels.c_str(), uptime.count());
  out += "# HELP spoold_uptime_seconds Seconds since the server started.\n";
  out += "# TYPE spoold_uptime_seconds gauge\n";
  out.append(buf, static_cast<std::size_t>(n));
  family(out, "spoold_response_bytes_total", "counter", labels,
         "Response bytes sent (head and body).", snap.bytes_sent);
  family(out, "spoold_connections_open", "gauge", labels, "Client connections open now.",
         snap.connections_open);
  family(out, "spoold_connections_accepted_total", "counter", labels,
         "Client connections accepted.", snap.connections_accepted);
  family(out, "spoold_connections_refused_total", "counter", labels,
         "Connections turned away with 503 past --max-connections.", snap.connections_refused);
  family(out, "spoold_accepts_exhausted_total", "counter", labels,
         "Accepts that failed for want of descriptors or memory (accepting then pauses).",
         snap.accepts_exhausted);
  family(out, "spoold_loop_yields_total", "counter", labels,
         "Times an event loop that had held its core for --loop-slice yielded it.",
         snap.loop_yields);
  family(out, "spoold_connections_refused_per_client_total", "counter", labels,
         "Connections turned away with 429 past --max-connections-per-client.",
         snap.refused_per_client);
  family(out, "spoold_requests_rate_limited_total", "counter", labels,
         "Requests answered 429 past --rate-limit.", snap.rate_limited);
  family(out, "spoold_proxy_header_errors_total", "counter", labels,
         "Connections of --proxy-protocol peers closed for a missing, malformed, oversized, "
         "truncated or late PROXY header.",
         snap.proxy_header_errors);
  family(out, "spoold_store_errors_total", "counter", labels, "Guestbook store calls that failed.",
         snap.store_errors);
  family(out, "spoold_guestbook_replays_total", "counter", labels,
         "Guestbook posts whose key was already stored (answered, not stored again).",
         snap.post_replays);
  const std::string node_label = impl_->node.empty() ? "" : ",node=\"" + impl_->node + '"';
  out +=
      "# HELP spoold_tls_handshakes_total TLS handshakes completed, full (resumed=\"0\") "
      "or resuming a session (resumed=\"1\").\n";
  out += "# TYPE spoold_tls_handshakes_total counter\n";
  for (int resumed = 0; resumed <= 1; ++resumed) {
    out += "spoold_tls_handshakes_total{resumed=\"";
    out += static_cast<char>('0' + resumed);
    out += '"' + node_label + "} ";
    append_u64(out, resumed == 1 ? snap.tls_resumed : snap.tls_handshakes - snap.tls_resumed);
    out += '\n';
  }
  out += "# HELP spoold_tls_handshake_failures_total TLS handshakes that failed, by reason.\n";
  out += "# TYPE spoold_tls_handshake_failures_total counter\n";
  for (std::size_t i = 0; i < tls_failure_reasons; ++i) {
    out += "spoold_tls_handshake_failures_total{reason=\"";
    out += tls_failure_names[i];
    out += '"' + node_label + "} ";
    append_u64(out, snap.tls_failures[i]);
    out += '\n';
  }
  out +=
      "# HELP spoold_connections_shed_total Connections a worker gave up to a client waiting "
      "for one, by what they waited on their client for.\n";
  out += "# TYPE spoold_connections_shed_total counter\n";
  for (std::size_t i = 0; i < shed_states; ++i) {
    out += "spoold_connections_shed_total{state=\"";
    out += shed_state_names[i];
    out += '"' + node_label + "} ";
    append_u64(out, snap.connections_shed[i]);
    out += '\n';
  }
  family(out, "spool_threads_live", "gauge", labels, "Worker threads of the pool.",
         pool.threads_live);
  family(out, "spool_threads_busy", "gauge", labels, "Workers running a task now.",
         pool.threads_busy);
  family(out, "spool_queue_depth", "gauge", labels, "Tasks waiting in the pool's queues.",
         pool.queued);
  family(out, "spool_tasks_submitted_total", "counter", labels, "Tasks the pool accepted.",
         pool.submitted);
  family(out, "spool_tasks_completed_total", "counter", labels, "Tasks that ran and returned.",
         pool.completed);
  family(out, "spool_tasks_failed_total", "counter", labels, "Tasks that ran and threw.",
         pool.failed);
  family(out, "spool_tasks_rejected_total", "counter", labels, "Submissions the pool refused.",
         pool.rejected);
  family(out, "spool_tasks_stolen_total", "counter", labels,
         "Tasks taken from another worker's deque.", pool.stolen);
  family(out, "spool_threads_started_total", "counter", labels, "Worker threads started.",
         pool.threads_started);
  family(out, "spool_threads_retired_total", "counter", labels,
         "Worker threads retired while idle.", pool.threads_retired);
  return out;
}

std::string metrics::json(const spool::stats& pool) const {
  metrics_snapshot snap = snapshot();
  auto uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->started);
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());

  std::string out;
  out.reserve(640);
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "{\"uptime_s\":%.3f,\"time_ms\":%lld,", uptime.count(),
                        static_cast<long long>(now_ms.count()));
  out.append(buf, static_cast<std::size_t>(n));
  json_field(out, "requests", snap.requests);
  out += ",\"status\":{";
  for (int c = 1; c <= 5; ++c) {
    if (c > 1) out += ',';
    char name[4] = {static_cast<char>('0' + c), 'x', 'x', '\0'};
    json_field(out, name, snap.by_status[c]);
  }
  out += '}';
  const std::pair<std::string_view, std::uint64_t> counters[] = {
      {"bytes_sent", snap.bytes_sent},
      {"connections_open", snap.connections_open},
      {"connections_accepted", snap.connections_accepted},
      {"connections_refused", snap.connections_refused},
      {"accepts_exhausted", snap.accepts_exhausted},
      {"loop_yields", snap.loop_yields},
      {"connections_refused_per_client", snap.refused_per_client},
      {"requests_rate_limited", snap.rate_limited},
      {"proxy_header_errors", snap.proxy_header_errors},
      {"store_errors", snap.store_errors},
      {"guestbook_replays", snap.post_replays}};
  for (const auto& [name, value] : counters) {
    out += ',';
    json_field(out, name, value);
  }
  if (!impl_->node.empty()) out += ",\"node\":\"" + impl_->node + '"';
  out += ",\"pool\":{";
  const std::pair<std::string_view, std::uint64_t> fields[] = {
      {"threads_live", pool.threads_live},
      {"threads_busy", pool.threads_busy},
      {"queued", pool.queued},
      {"submitted", pool.submitted},
      {"completed", pool.completed},
      {"failed", pool.failed},
      {"rejected", pool.rejected},
      {"stolen", pool.stolen},
      {"threads_started", pool.threads_started},
      {"threads_retired", pool.threads_retired}};
  bool first = true;
  for (const auto& [name, value] : fields) {
    if (!first) out += ',';
    first = false;
    json_field(out, name, value);
  }
  out += "}}";
  return out;
}

}  // namespace spoold
