// What the classic models share (every model but epoll): one listening socket, the stop
// signal every waiting thread and child process watches, the threads the model starts, the
// access log's flusher, and the way they start, stop and are waited for.
//
// start() opens the listener (blocking for the models that block in accept(): iterative,
// threaded, prethreaded, queue, preforked; non-blocking for the ones that poll it: poll,
// forking), starts the log flusher if the model's threads log in this process and the memory
// trimmer if it serves connections on many threads, then calls start_threads(). stop() raises
// the stop and, for a blocking listener, shuts it down, which ends every accept() blocked on
// it, in this process and in forked children (README.md, "Stopping accept"). wait() joins the
// threads started with spawn(), then calls join_connections() for connections served on other
// threads, then stops the flusher, which writes what they logged last. Models are made with
// make_stopped_on_destruction (model.hpp).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "conn/listener.hpp"
#include "event/stop_signal.hpp"
#include "models/memory_trim.hpp"
#include "models/model.hpp"
#include "models/serve_connection.hpp"

namespace spoold {

// Writes the access log's buffer 100 ms after a line starts waiting there, on its own thread,
// until destroyed (the event loops do this themselves: loop_chores.hpp). Does nothing without
// an access log.
class log_flusher {
 public:
  explicit log_flusher(access_log* log);
  ~log_flusher();
  log_flusher(const log_flusher&) = delete;
  log_flusher& operator=(const log_flusher&) = delete;

 private:
  access_log* log_;
  std::mutex mu_;  // for cv_'s timed wait, which only a stop ends early
  std::condition_variable_any cv_;
  std::jthread thread_;
};

struct classic_shape {
  bool blocking_accept = true;  // threads block in accept(); else the model polls the listener
  bool log_flusher = true;      // its threads write access-log lines in this process
  // Connections are served on many threads of this process (threaded, prethreaded, queue):
  // a trimmer thread gives their memory back once none is open (memory_trim.hpp).
  bool trim_memory = false;
};

class classic_model : public server_model {
 public:
  std::uint16_t start() final;
  void stop() final;
  void wait() final;

 protected:
  classic_model(server_context& ctx, classic_shape shape) : ctx_(ctx), shape_(shape) {}
  ~classic_model() override = default;

  // start()'s last step, once listening. If it throws, start() stops and waits for whatever it
  // started, then rethrows.
  virtual void start_threads() = 0;
  // wait()'s second step, after the threads of spawn() are joined: waits for the connections
  // the model served elsewhere (its own threads, the pool).
  virtual void join_connections() {}

  // Starts a thread named `name` running `body`; wait() joins it. Only start_threads() calls it.
  void spawn(std::string name, std::function<void()> body);
  // Accepts until the stop is raised or the listener is shut down, and hands each new connection
  // to on_accept, which owns it from then on. With `accept_mu` the mutex is held around accept()
  // alone, never while on_accept runs. Out of descriptors, it sleeps for accept_pause (or until
  // the stop) between tries rather than spin.
  void accept_loop(const std::function<void(accepted&&)>& on_accept,
                   std::mutex* accept_mu = nullptr);
  // Starts a thread named `name` that runs accept_loop(on_accept, accept_mu).
  void spawn_acceptor(std::string name, std::function<void(accepted&&)> on_accept,
                      std::mutex* accept_mu = nullptr);
  // A connection the model closed without serving it (queue's handshake stage dropped it):
  // the memory trimmer counts it as ended.
  void connection_dropped() noexcept {
    if (shape_.trim_memory) trim_.connection_dropped();
  }
  // Serves one connection on the calling thread until it closes.
  void serve(accepted&& a, serve_options opts = {}) {
    if (!shape_.trim_memory) {
      serve_connection(ctx_, stop_, std::move(a), opts);
      return;
    }
    trim_.connection_started();
    serve_connection(ctx_, stop_, std::move(a), opts);
    trim_.connection_ended();
  }

  server_context& ctx_;
  stop_signal stop_;
  listener listener_;

 private:
  classic_shape shape_;
  shared_memory_trim trim_;
  std::vector<std::thread> threads_;
  std::optional<log_flusher> flusher_;
};

}  // namespace spoold
