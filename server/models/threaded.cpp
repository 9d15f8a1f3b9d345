// Thread per connection: an acceptor thread starts a new thread for every connection, which
// serves it with blocking waits and ends with it. Simple and fair, but every connection costs
// a thread (a stack, a kernel task, a context switch per wake-up) for as long as it is open,
// idle keep-alive time included (README.md).
//
// Threads are joined, not detached, so that nothing of ours (a thread's last steps, its
// thread-local destructors, which close its store connection) runs after wait() returns. A
// finishing thread moves itself from `running_` to `exited_` and wakes the reaper, one thread
// that joins whatever is in `exited_`. The joins are independent of each other: a finished
// thread is gone as soon as the reaper gets to it, however many finish at once. (A finishing
// thread that joined its predecessor itself would make a chain, each thread alive until the
// one before it had exited; under a stream of short connections the chain grows faster than
// it unwinds, and tens of thousands of finished threads stay alive, each with its stack and
// its store connection.)
#include <condition_variable>
#include <cstdio>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include "models/classic_model.hpp"
#include "thread_name.hpp"

namespace spoold {
namespace {

class threaded_model : public classic_model {
 public:
  explicit threaded_model(server_context& ctx) : classic_model(ctx, {.trim_memory = true}) {}

 private:
  void start_threads() override {
    reaper_ = std::thread([this] {
      name_this_thread("spoold-reaper");
      reap();
    });
    spawn_acceptor("spoold-accept", [this](accepted&& a) {
      if (!start_thread(a)) refuse_connection(ctx_, std::move(a));
    });
  }

  void join_connections() override {
    {
      // The acceptor is gone, so `running_` only shrinks; the grace period bounds each connection.
      std::unique_lock lock(mu_);
      all_done_.wait(lock, [this] { return running_.empty(); });
      reaper_stopping_ = true;
    }
    reaped_.notify_one();
    if (reaper_.joinable()) reaper_.join();  // it joins what is left in `exited_` first
  }

  // Joins finished threads until join_connections() says no more can come and none is left.
  void reap() {
    std::unique_lock lock(mu_);
    for (;;) {
      reaped_.wait(lock, [this] { return !exited_.empty() || reaper_stopping_; });
      if (exited_.empty()) return;
      std::list<std::thread> batch;
      batch.swap(exited_);
      lock.unlock();
      for (std::thread& t : batch) t.join();
      lock.lock();
    }
  }

  // False when the connection cannot have a thread: past --max-connections, or the system
  // refused one. On success the new thread owns the socket.
  bool start_thread(accepted& a) {
    std::lock_guard lock(mu_);
    if (running_.size() >= ctx_.opts.max_connections) return false;
    auto self = running_.emplace(running_.end());
    try {
      // Under mu_: the new thread cannot reach finish() before *self holds it.
      *self = std::thread([this, self, conn = std::move(a)]() mutable {
        name_this_thread("spoold-conn");
        serve(std::move(conn));
        finish(self);
      });
    } catch (const std::system_error& e) {
      running_.erase(self);
      std::fprintf(stderr, "spoold: cannot start a connection thread: %s\n", e.what());
      return false;
    }
    a.fd = -1;  // NOLINT(bugprone-use-after-move): the thread owns the socket now
    return true;
  }

  void finish(std::list<std::thread>::iterator self) {
    std::lock_guard lock(mu_);
    const bool reaper_idle = exited_.empty();  // otherwise a wake-up is already owed to it
    exited_.splice(exited_.end(), running_, self);
    // Notified under the lock: wait() may destroy the model as soon as it can take mu_.
    if (reaper_idle) reaped_.notify_one();
    if (running_.empty()) all_done_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable all_done_;  // running_ became empty
  std::condition_variable reaped_;    // exited_ became non-empty, or reaper_stopping_
  std::list<std::thread> running_;    // guarded by mu_: connections being served
  std::list<std::thread> exited_;     // guarded by mu_: finished, not yet joined
  bool reaper_stopping_ = false;      // guarded by mu_: no thread will be added to exited_
  std::thread reaper_;
};

}  // namespace

std::unique_ptr<server_model> make_threaded_model(server_context& ctx) {
  return make_stopped_on_destruction<threaded_model>(ctx);
}

}  // namespace spoold
