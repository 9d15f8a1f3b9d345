// What every part of the server reaches: the options, the application, the counters, the pool,
// the access log, and the shared parts of connection handling (refusals, per-client limits,
// TLS). main() makes one and hands it to the model, which hands it to every connection.
#pragma once

#include <cstdint>

#include <spool/spool.hpp>

#include "app/access_log.hpp"
#include "app/app.hpp"
#include "app/metrics.hpp"
#include "options.hpp"

namespace spoold {

class refusals;
class client_table;
class tls_context;

struct server_context {
  const options& opts;
  app& application;
  metrics& counters;
  spool::pool& pool;
  access_log* log;  // nullptr when access logging is off
  // Where refused connections linger (limits/refusals.hpp); nullptr: they are closed at once.
  refusals* refused = nullptr;
  // Per-client counts and buckets (limits/client_limits.hpp); nullptr when no per-client limit
  // is set.
  client_table* clients = nullptr;
  // The certificate and settings of the TLS listener (conn/tls.hpp); nullptr without TLS.
  tls_context* tls = nullptr;
  // The port the TLS listener got (--tls-port, or --port with --tls-only), set by start().
  std::uint16_t tls_port = 0;
};

}  // namespace spoold
