// Whether a model with a fixed number of workers (prethreaded's threads, preforked's processes)
// is out of them: every worker holds a connection, and a client waits in the listen backlog for
// one. A worker whose connection only waits on its client (a TLS handshake, a PROXY header, a
// request head, or idle keep-alive) then gives it up to the waiting client (serve_connection,
// models/serve_connection.hpp), as Apache's event MPM and mod_reqtimeout do for the same designs:
// without that, as many slow clients as there are workers stop the server for everyone else until
// --header-timeout or --idle-timeout.
//
// Both parts are read, never waited on: the count of busy workers (an atomic, shared across
// processes in preforked) and the listening socket's readiness (a zero-timeout poll(), made only
// when every worker is busy). Nobody is woken when the pressure begins: a worker whose
// connection waits on its client looks at the pressure on a short tick, from the moment its
// connection has waited long enough to be given up (serve_connection).
#pragma once

#include <poll.h>

#include <cstddef>
#include <functional>
#include <utility>

namespace spoold {

class worker_pressure {
 public:
  // `busy_workers`: how many of the `workers` hold a connection now; `listen_fd`: the socket
  // they accept from. Both must outlive the object (in preforked: its copy in each worker).
  worker_pressure(std::function<std::size_t()> busy_workers, std::size_t workers,
                  int listen_fd) noexcept
      : busy_workers_(std::move(busy_workers)), workers_(workers), listen_fd_(listen_fd) {}

  // True while every worker holds a connection and a connection waits to be accepted. A
  // listener shut down at the stop reports a hang-up, not a waiting client: false then.
  [[nodiscard]] bool on() const noexcept {
    if (busy_workers_() < workers_) return false;
    pollfd p{listen_fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && p.revents == POLLIN;
  }

 private:
  std::function<std::size_t()> busy_workers_;
  std::size_t workers_;
  int listen_fd_;
};

}  // namespace spoold
