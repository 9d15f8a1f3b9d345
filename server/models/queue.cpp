// The producer-consumer server: one acceptor thread produces connections into libspool's
// bounded queue, and the pool's workers consume them, each serving one connection to its end.
// The pool is main's: --threads MIN:MAX sets how many connections are served at once, its
// queue (16384) how many may wait, and a full queue (or a stopping pool) is answered 503.
//
// A connection blocks on its socket for its whole life, so it is served inside a
// spool::blocking_region: the elastic pool starts a compensating worker at once (up to MAX)
// instead of waiting for its monitor to notice the stall. Past MAX open connections the rest
// wait in the queue until a connection ends, idle keep-alive time included (README.md).
//
// With --tls-only a connection reaches the pool only once its TLS handshake has ended: the
// handshakes run on a thread of their own (handshake_stage.hpp), so a client slow to handshake
// holds no worker.
#include <optional>

#include <spool/spool.hpp>

#include "models/classic_model.hpp"
#include "models/handshake_stage.hpp"

namespace spoold {
namespace {

class queue_model : public classic_model {
 public:
  explicit queue_model(server_context& ctx) : classic_model(ctx, {.trim_memory = true}) {}

 private:
  void start_threads() override {
    if (ctx_.opts.tls_only) {
      // A dropped handshake is told to the trimmer before release(), after which wait() may
      // return and the model go.
      stage_.emplace(
          ctx_, stop_, [this](accepted&& a) { post(std::move(a)); },
          [this] {
            connection_dropped();
            release();
          });
      stage_->start();
    }
    spawn_acceptor("spoold-accept", [this](accepted&& a) { hand_off(std::move(a)); });
  }

  // wait() returns once every connection handed to the pool has been served or closed.
  // Connections still queued at the stop are served too (a request that already arrived is in
  // flight); each ends by the grace period, and one that starts after it closes at once.
  void join_connections() override {
    if (stage_) stage_->join();  // every handshake it held went to the pool or was dropped
    std::unique_lock lock(mu_);
    all_done_.wait(lock, [this] { return open_ == 0; });
  }

  void hand_off(accepted&& a) {
    if (!admit()) {
      refuse_connection(ctx_, std::move(a));
      return;
    }
    if (stage_ && a.tls != nullptr && a.ssl == nullptr) {
      stage_->add(std::move(a));  // counted in open_ from here; post() or release() follows
      return;
    }
    post(std::move(a));
  }

  // Gives an admitted connection to the pool.
  void post(accepted&& a) {
    // The task holds a copy of the socket's number: if the pool refuses it, the task is gone
    // and the socket is still ours.
    std::error_code err = ctx_.pool.try_post([this, conn = std::move(a)]() mutable {
      {
        spool::blocking_region blocking;
        serve(std::move(conn));
      }
      release();
    });
    if (err) {
      release();
      // The refused task took the client slot with it; the socket is still ours.
      refuse_connection(ctx_, std::move(a));  // NOLINT(bugprone-use-after-move)
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

  std::mutex mu_;
  std::condition_variable all_done_;
  std::size_t open_ = 0;  // guarded by mu_: in the handshake stage, queued or being served
  std::optional<handshake_stage> stage_;  // --tls-only
};

}  // namespace

std::unique_ptr<server_model> make_queue_model(server_context& ctx) {
  return make_stopped_on_destruction<queue_model>(ctx);
}

}  // namespace spoold
