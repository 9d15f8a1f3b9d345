// The producer-consumer server: one acceptor thread produces connections into libspool's
// bounded queue, and the pool's workers consume them, each serving one connection to its end.
// The pool is main's: --threads MIN:MAX sets how many connections are served at once, its
// queue (16384) how many may wait, and a full queue (or a stopping pool) is answered 503.
//
// A session blocks on its socket for its whole life, so it runs inside a
// spool::blocking_region: the elastic pool starts a compensating worker at once (up to MAX)
// instead of waiting for its monitor to notice the stall. Past MAX open connections the rest
// wait in the queue until a session ends, idle keep-alive time included (README.md).
#include <thread>

#include <spool/spool.hpp>

#include "models/blocking_model.hpp"
#include "models/model.hpp"
#include "models/session.hpp"

namespace spoold {
namespace {

class queue_model final : public blocking_model {
 public:
  explicit queue_model(server_context& ctx) : blocking_model(ctx) {}
  ~queue_model() override {
    stop();
    wait();
  }

  std::uint16_t start() override {
    const std::uint16_t port = listen();
    start_log_flusher();
    acceptor_ = std::thread([this] {
      name_this_thread("spoold-accept");
      accept_loop([this](int fd, const sockaddr_in& peer) { hand_off(fd, peer); });
    });
    return port;
  }

 private:
  // wait() returns once every connection handed to the pool has been served or closed.
  // Connections still queued at the stop are served too (a request that already arrived is in
  // flight); each session ends by the grace period, and one that starts after it closes at once.
  void join_threads() override {
    if (acceptor_.joinable()) acceptor_.join();
    std::unique_lock lock(mu_);
    all_done_.wait(lock, [this] { return open_ == 0; });
  }

  void hand_off(int fd, const sockaddr_in& peer) {
    if (!admit()) {
      refuse_connection(ctx_, fd);
      return;
    }
    std::error_code err = ctx_.pool.try_post([this, fd, peer] {
      {
        spool::blocking_region blocking;
        serve_connection(ctx_, stop_, fd, peer);
      }
      release();
    });
    if (err) {
      // The task (and with it nothing but a copy of fd) is gone; the socket is still ours.
      release();
      refuse_connection(ctx_, fd);
    }
  }

  bool admit() {
    std::lock_guard lock(mu_);
    if (open_ >= ctx_.opts.max_connections) return false;
    ++open_;
    return true;
  }

  void release() {
    std::lock_guard lock(mu_);
    // Notified under the lock: wait() may destroy the model as soon as it can take mu_.
    if (--open_ == 0) all_done_.notify_all();
  }

  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable all_done_;
  std::size_t open_ = 0;  // guarded by mu_: queued or being served
};

}  // namespace

std::unique_ptr<server_model> make_queue_model(server_context& ctx) {
  return std::make_unique<queue_model>(ctx);
}

}  // namespace spoold
