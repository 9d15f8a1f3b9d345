// A server architecture: how connections are accepted and who runs a request. Every model
// serves the same app (routes, limits, answers) through the same HTTP code; they differ only in
// how they use threads, processes and readiness notification (server/models/README.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include <spool/spool.hpp>

#include "app/access_log.hpp"
#include "app/app.hpp"
#include "app/metrics.hpp"
#include "options.hpp"

namespace spoold {

struct server_context {
  const options& opts;
  app& application;
  metrics& counters;
  spool::pool& pool;
  access_log* log;  // nullptr when access logging is off
};

// Every model's answer to a connection it refuses: past --max-connections, or when no thread,
// process or queue slot can take it. Sent in one try, then the connection is closed.
inline constexpr std::string_view refused_response =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 33\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    "Too many connections; try again.\n";

class server_model {
 public:
  virtual ~server_model() = default;
  // Binds and starts serving; returns the port (useful with --port 0). Throws on failure.
  virtual std::uint16_t start() = 0;
  // Stop accepting; in-flight requests may finish until the grace period ends. Returns at once.
  virtual void stop() = 0;
  // Blocks until every connection is closed (or the grace period forced them closed) and the
  // model's threads are joined. Blocking jobs already handed to the pool may still be running:
  // the caller drains the pool before destroying the model.
  virtual void wait() = 0;
};

// Throws std::invalid_argument for an unknown name (the message lists the known ones).
std::unique_ptr<server_model> make_model(std::string_view name, server_context& ctx);

std::unique_ptr<server_model> make_epoll_model(server_context& ctx);
// The classic architectures (README.md has one section each).
std::unique_ptr<server_model> make_poll_model(server_context& ctx);
std::unique_ptr<server_model> make_iterative_model(server_context& ctx);
std::unique_ptr<server_model> make_forking_model(server_context& ctx);
std::unique_ptr<server_model> make_preforked_model(server_context& ctx);
std::unique_ptr<server_model> make_threaded_model(server_context& ctx);
std::unique_ptr<server_model> make_prethreaded_model(server_context& ctx);
std::unique_ptr<server_model> make_queue_model(server_context& ctx);

}  // namespace spoold
