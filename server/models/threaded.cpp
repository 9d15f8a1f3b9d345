// Thread per connection: an acceptor thread starts a new thread for every connection, which
// serves it with blocking waits and ends with it. Simple and fair, but every connection costs
// a thread (a stack, a kernel task, a context switch per wake-up) for as long as it is open,
// idle keep-alive time included (README.md).
//
// Threads are joined, not detached: a finishing thread moves itself to `exited_` and joins the
// threads that were there before it, so at most one finished thread waits to be joined at any
// time, and wait() can join the last ones. Nothing of ours runs after wait() returns.
#include <cstdio>
#include <list>
#include <system_error>
#include <thread>

#include "models/blocking_model.hpp"
#include "models/model.hpp"
#include "models/session.hpp"

namespace spoold {
namespace {

class threaded_model final : public blocking_model {
 public:
  explicit threaded_model(server_context& ctx) : blocking_model(ctx) {}
  ~threaded_model() override {
    stop();
    wait();
  }

  std::uint16_t start() override {
    const std::uint16_t port = listen();
    start_log_flusher();
    acceptor_ = std::thread([this] {
      name_this_thread("spoold-accept");
      accept_loop([this](int fd, const sockaddr_in& peer) {
        if (!start_session(fd, peer)) refuse_connection(ctx_, fd);
      });
    });
    return port;
  }

 private:
  void join_threads() override {
    if (acceptor_.joinable()) acceptor_.join();
    std::list<std::thread> last;
    {
      // The acceptor is gone, so `running_` only shrinks; the grace period bounds each session.
      std::unique_lock lock(mu_);
      all_done_.wait(lock, [this] { return running_.empty(); });
      last.swap(exited_);
    }
    for (std::thread& t : last) t.join();
  }

  // False when the connection cannot have a thread: past --max-connections, or the system
  // refused one.
  bool start_session(int fd, const sockaddr_in& peer) {
    std::lock_guard lock(mu_);
    if (running_.size() >= ctx_.opts.max_connections) return false;
    auto self = running_.emplace(running_.end());
    try {
      // Under mu_: the new thread cannot reach finish() before *self holds it.
      *self = std::thread([this, self, fd, peer] {
        name_this_thread("spoold-conn");
        serve_connection(ctx_, stop_, fd, peer);
        finish(self);
      });
    } catch (const std::system_error& e) {
      running_.erase(self);
      std::fprintf(stderr, "spoold: cannot start a connection thread: %s\n", e.what());
      return false;
    }
    return true;
  }

  void finish(std::list<std::thread>::iterator self) {
    std::list<std::thread> to_join;
    {
      std::lock_guard lock(mu_);
      to_join.swap(exited_);
      exited_.splice(exited_.end(), running_, self);
      // Notified under the lock: wait() may destroy the model as soon as it can take mu_.
      if (running_.empty()) all_done_.notify_all();
    }
    for (std::thread& t : to_join) t.join();
  }

  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable all_done_;
  std::list<std::thread> running_;  // guarded by mu_: sessions in progress
  std::list<std::thread> exited_;   // guarded by mu_: finished, not yet joined
};

}  // namespace

std::unique_ptr<server_model> make_threaded_model(server_context& ctx) {
  return std::make_unique<threaded_model>(ctx);
}

}  // namespace spoold
