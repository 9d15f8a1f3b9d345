// One connection served on the calling thread until it closes: the models that give a
// connection a thread or a process of its own (iterative, forking, preforked, threaded,
// prethreaded, queue) call serve_connection.
#pragma once

#include "conn/connection.hpp"
#include "conn/inline_driver.hpp"
#include "event/stop_signal.hpp"

namespace spoold {

class worker_pressure;

struct serve_options {
  // A forked child has no thread flushing the access log's buffer: the connection's thread
  // flushes it whenever the connection goes back to waiting for a request, and at the end.
  bool flush_log_when_idle = false;
  // The models with a fixed number of workers (prethreaded, preforked): while every worker is
  // busy and a client waits for one, a connection that has waited on its client alone for
  // shed_after is given up (connection::shed) to free its worker. nullptr: never.
  const worker_pressure* pressure = nullptr;
};

// How long a connection waits on its client alone before its worker may give it up under
// pressure (serve_options::pressure), and how often such a worker looks at the pressure from
// then on. Short beside the timeouts (a legitimate head or handshake takes a round trip or
// two), long enough that a client that just got its answer has time to send the next request.
inline constexpr auto shed_after = std::chrono::milliseconds(300);
inline constexpr auto pressure_check_interval = std::chrono::milliseconds(100);

// Serves one connection on the calling thread until it closes, waiting in poll() on its socket
// and the stop signal; takes ownership of the socket.
void serve_connection(server_context& ctx, const stop_signal& stop, accepted&& a,
                      serve_options opts = {});

}  // namespace spoold
