// Request counters for /metrics and the dashboard. Recording is a relaxed add into a shard
// owned by the calling thread, so event loops do not share cache lines; reading sums shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <spool/spool.hpp>

namespace spoold {

// The reasons a TLS handshake fails, as spoold_tls_handshake_failures_total's `reason` label,
// in the order of conn/tls.hpp's tls_failure.
inline constexpr std::string_view tls_failure_names[] = {"closed", "timeout", "plaintext",
                                                         "protocol", "alpn"};
inline constexpr std::size_t tls_failure_reasons = std::size(tls_failure_names);

// What a connection waited on its client for when its worker gave it up to a client waiting for
// a worker (prethreaded, preforked: models/README.md, "Slow clients"), as
// spoold_connections_shed_total's `state` label, in the order of connection.hpp's shed_state.
inline constexpr std::string_view shed_state_names[] = {"handshake", "proxy_header", "head",
                                                        "idle"};
inline constexpr std::size_t shed_states = std::size(shed_state_names);

struct metrics_snapshot {
  std::uint64_t requests = 0;
  std::uint64_t by_status[6] = {};  // index status / 100 (1xx..5xx)
  std::uint64_t bytes_sent = 0;
  std::uint64_t connections_open = 0;
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_refused = 0;  // turned away with 503 past --max-connections
  std::uint64_t accepts_exhausted = 0;    // accept() out of descriptors or memory
  std::uint64_t loop_yields = 0;          // event loops that yielded their core (--loop-slice)
  std::uint64_t refused_per_client = 0;   // turned away with 429 past --max-connections-per-client
  std::uint64_t rate_limited = 0;         // requests answered 429 past --rate-limit
  std::uint64_t proxy_header_errors = 0;  // --proxy-protocol connections closed for their header
  std::uint64_t store_errors = 0;
  std::uint64_t post_replays = 0;    // guestbook posts whose key was already stored
  std::uint64_t tls_handshakes = 0;  // TLS handshakes completed
  std::uint64_t tls_resumed = 0;     // of which resumed a session
  std::uint64_t tls_failures[tls_failure_reasons] = {};  // by reason (tls_failure_names)
  std::uint64_t connections_shed[shed_states] = {};      // by state (shed_state_names)
};

class metrics {
 public:
  metrics();
  ~metrics();
  metrics(const metrics&) = delete;
  metrics& operator=(const metrics&) = delete;

  void record_response(int status, std::uint64_t bytes) noexcept;
  void connection_opened() noexcept;
  void connection_closed() noexcept;
  void connection_refused() noexcept;
  void accept_exhausted() noexcept;
  void loop_yielded() noexcept;
  void connection_refused_per_client() noexcept;
  void request_rate_limited() noexcept;
  void proxy_header_error() noexcept;
  void store_error() noexcept;
  void post_replayed() noexcept;
  void tls_handshake_done(bool resumed) noexcept;
  void tls_handshake_failed(std::size_t reason) noexcept;  // an index of tls_failure_names
  void connection_shed(std::size_t state) noexcept;        // an index of shed_state_names

  // The node's name (--node-name): a node="NAME" label on every Prometheus sample and a "node"
  // field in the JSON. Set before serving; "" (the default) leaves both out. The name must be
  // safe in a label and a JSON string unescaped (options.cpp allows letters, digits, '-', '_'
  // and '.').
  void set_node_name(std::string name);

  // From now on every process forked from this one counts into one set of counters in shared
  // memory, so that /metrics in any of them reports the whole server (the forking and
  // preforked models). Call before forking and before counting anything. Counting then costs a
  // contended atomic add across processes, which is why the threaded models do not use it.
  // Throws std::system_error if the memory cannot be mapped.
  void share_across_processes();

  [[nodiscard]] metrics_snapshot snapshot() const;
  // Per-status-code counts (every code seen), for the Prometheus text.
  [[nodiscard]] std::uint64_t count_for(int status) const;

  // Prometheus text exposition (version 0.0.4): spoold_requests_total{code="200"},
  // spoold_response_bytes_total, spoold_connections_open, spoold_connections_accepted_total,
  // spoold_connections_refused_total, spoold_accepts_exhausted_total, spoold_loop_yields_total,
  // spoold_connections_refused_per_client_total, spoold_requests_rate_limited_total,
  // spoold_proxy_header_errors_total,
  // spoold_store_errors_total,
  // spoold_guestbook_replays_total, spoold_tls_handshakes_total{resumed="0|1"},
  // spoold_tls_handshake_failures_total{reason="..."} (tls_failure_names),
  // spoold_connections_shed_total{state="..."} (shed_state_names), and the pool's
  // spool_threads_live, spool_threads_busy, spool_queue_depth, spool_tasks_completed_total,
  // spool_tasks_stolen_total, spool_tasks_rejected_total (+ submitted, failed).
  [[nodiscard]] std::string prometheus(const spool::stats& pool) const;
  // The same figures as one JSON object, for the dashboard's once-a-second poll, with
  // "uptime_s" and "time_ms" so the page can turn totals into rates.
  [[nodiscard]] std::string json(const spool::stats& pool) const;

 private:
  struct impl;
  impl* impl_;
};

}  // namespace spoold
