// What the models that block in accept() share (iterative, threaded, prethreaded, queue, and
// preforked's workers): a blocking listening socket, the stop signal, the accept loop, and the
// way they stop. stop() raises the stop and shuts the listening socket down, which ends every
// accept() blocked on it, in this process and in forked children (README.md, "Stopping accept").
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

#include "models/model.hpp"
#include "models/session.hpp"

namespace spoold {

// Destruction order. The model's threads use ctx_, stop_ and listen_fd_, which live in this base
// and so outlive the derived class's members; but this base's destructor runs only after the
// derived part is gone, too late to join threads that are derived members (and past the point
// where a virtual call still reaches the derived class). So every derived class's destructor
// calls stop() and wait() itself, joining its threads before its own members and then this base
// are destroyed; this base's destructor only closes the listening socket.
class blocking_model : public server_model {
 public:
  void stop() override;
  // Joins the model's threads (join_threads), then stops the log flusher, which writes what
  // they logged last.
  void wait() final;

 protected:
  explicit blocking_model(server_context& ctx) : ctx_(ctx) {}
  ~blocking_model() override;  // closes the listening socket; see the class comment

  // start()'s first step: binds the listening socket, blocking, and returns its port. Throws
  // (the destructor closes a socket already opened).
  std::uint16_t listen();
  // Starts the thread that flushes the access log, for models whose threads write log lines
  // in this process; stopped by wait().
  void start_log_flusher();
  // Joins every thread the model started; wait() calls it. Returns once they are all joined.
  virtual void join_threads() = 0;

  // Accepts until the stop is raised or the listening socket is shut down, and hands each new
  // connection (non-blocking, close-on-exec) to on_accept, which owns its descriptor from then
  // on. With `accept_mu` the mutex is held around accept() alone, never while on_accept runs.
  // Out of descriptors, it sleeps 100 ms (or until the stop) between tries rather than spin.
  void accept_loop(const std::function<void(int fd, const sockaddr_in& peer)>& on_accept,
                   std::mutex* accept_mu = nullptr);

  server_context& ctx_;
  stop_signal stop_;
  int listen_fd_ = -1;

 private:
  std::optional<log_flusher> flusher_;
};

}  // namespace spoold
