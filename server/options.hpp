// spoold's settings: command line over SPOOLD_* environment variables over defaults
// (server/README.md lists them).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "http/parser.hpp"
#include "net.hpp"
#include "store/store.hpp"

namespace spoold {

struct options {
  std::string bind = "127.0.0.1";
  std::uint16_t port = 8080;
  std::string root;  // default: SPOOLD_DEFAULT_ROOT (the repository's server/site)
  unsigned min_threads = 2;
  unsigned max_threads = 64;
  unsigned loops = 0;  // 0: one per core
  // How long an event loop runs without waiting before it yields its core (event/run_slice.hpp);
  // 0: it never yields.
  std::chrono::microseconds loop_slice{100};
  std::string store = "sqlite:./spoold.db";
  // The Redis whose task queues (libspool_queue) /queue shows; "": the store, if it is Redis.
  std::string queue_store;
  std::string model = "epoll";
  // Processes (preforked) or threads (prethreaded); 0: the model's default (README.md).
  unsigned workers = 0;
  // prethreaded: accept() serialised by a mutex (true) or every thread blocked in accept().
  bool accept_lock = true;
  std::string access_log;  // "" off, "-" stdout, else a file
  std::size_t max_connections = 10000;
  // Per-client limits (README.md, "Per-client limits"); 0: none.
  std::size_t max_connections_per_client = 0;
  double rate_limit = 0;         // requests per second per client (N/m: N / 60)
  std::uint32_t rate_burst = 0;  // the bucket's size; 0: rate_limit
  // Peers exempt from both limits, whose requests are limited by X-Forwarded-For's last address.
  std::vector<ip_range> trust;
  // --proxy-protocol: a connection from a --trust peer starts with a PROXY header (v1 or v2),
  // whose source is the client; X-Forwarded-For is then ignored. Needs --trust.
  bool proxy_protocol = false;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds idle_timeout{15'000};
  // How long a keep-alive connection from a --trust peer may idle; 0: until the peer closes it
  // (a load balancer that reuses idle connections closes them itself, so that none is closed
  // under a request it is sending). nullopt: idle_timeout.
  std::optional<std::chrono::milliseconds> trust_idle_timeout;
  std::chrono::milliseconds write_timeout{30'000};
  std::chrono::milliseconds grace{10'000};
  // On SIGTERM/SIGINT, how long /healthz answers 503 (while everything is still served) before
  // the shutdown starts, so that a load balancer stops sending requests first. 0: no drain.
  std::chrono::milliseconds drain_delay{0};
  // A name for this server in a fleet ("" for none): the Spoold-Node header, the guestbook's
  // pages, /metrics labels, /api/stats and the dashboard.
  std::string node_name;
  // Redis: the connections the calls of every thread share; SQLite: those of exited threads
  // kept for new threads (store::store_options::connections).
  std::size_t store_connections = store::default_store_connections;
  // A guestbook post is acknowledged once this many Redis replicas have it (WAIT), waiting at
  // most store_replicas_timeout.
  unsigned store_replicas = 0;
  std::chrono::milliseconds store_replicas_timeout{1000};
  http::limits limits{};
  // TLS (README.md, "TLS"): the certificate chain and key (PEM), and where TLS is served: on
  // tls_port beside plain HTTP on `port` (epoll and poll only), or with tls_only on `port`
  // instead of plain HTTP. Both need the certificate and key.
  std::string tls_cert;
  std::string tls_key;
  std::optional<std::uint16_t> tls_port;
  bool tls_only = false;
};

enum class parse_outcome { run, help, version, error };

struct parsed_options {
  parse_outcome outcome = parse_outcome::run;
  options opts;
  std::string message;  // the error (outcome error) or the help/version text
};

// argv[0] is the program name. Environment variables are read with getenv.
parsed_options parse_options(int argc, char** argv);

}  // namespace spoold
