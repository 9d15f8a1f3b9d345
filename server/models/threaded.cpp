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

#include "models/classic_model.hpp"

namespace spoold {
namespace {

class threaded_model : public classic_model {
 public:
  explicit threaded_model(server_context& ctx) : classic_model(ctx, {}) {}

 private:
  void start_threads() override {
    spawn_acceptor("spoold-accept", [this](accepted&& a) {
      if (!start_thread(a)) refuse_connection(ctx_, std::move(a));
    });
  }

  void join_connections() override {
    std::list<std::thread> last;
    {
      // The acceptor is gone, so `running_` only shrinks; the grace period bounds each connection.
      std::unique_lock lock(mu_);
      all_done_.wait(lock, [this] { return running_.empty(); });
      last.swap(exited_);
    }
    for (std::thread& t : last) t.join();
  }

  // False when the connection cannot have a thread: past --max-connections, or the system
  // refused one. On success the new thread owns the socket.
  bool start_thread(accepted& a) {
    std::lock_guard lock(mu_);
    if (running_.size() >= ctx_.opts.max_connections) return false;
    auto self = running_.emplace(running_.end());
    try {
      // Under mu_: the new thread cannot reach finish() before *self holds it.
      *self = std::thread([this, self, conn = a] () mutable {
        name_this_thread("spoold-conn");
        serve(std::move(conn));
        finish(self);
      });
    } catch (const std::system_error& e) {
      running_.erase(self);
      std::fprintf(stderr, "spoold: cannot start a connection thread: %s\n", e.what());
      return false;
    }
    a.fd = -1;
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

  std::mutex mu_;
  std::condition_variable all_done_;
  std::list<std::thread> running_;  // guarded by mu_: connections being served
  std::list<std::thread> exited_;   // guarded by mu_: finished, not yet joined
};

}  // namespace

std::unique_ptr<server_model> make_threaded_model(server_context& ctx) {
  return make_stopped_on_destruction<threaded_model>(ctx);
}

}  // namespace spoold
