// Process per connection: the acceptor forks a child for every connection; the child serves it
// with blocking waits and exits. Isolation is complete (a crash takes one connection down) and
// so is the cost: a fork, page-table copies on write, a fresh store connection per client, and
// counters and access-log buffers that live and die with each child (README.md, "forking").
//
// Fork safety. spoold is multithreaded when this runs (main, the pool's workers and monitor,
// this acceptor); a child gets only the forking thread. It may therefore only use what no
// other thread can be holding a lock in at fork time:
//  - the store: the parent never makes a store call in this model (the store keeps one
//    connection per thread and this thread has none), so the child opens its own connection
//    on first use, as the per-thread connection rule asks;
//  - metrics and the access log: only this thread touches them in the parent, and it is the
//    one forking, so their mutexes are free; the child flushes its log lines itself;
//  - glibc's malloc resets its locks in the child; the child never touches the pool (blocking
//    jobs run inline), whose threads do not exist there;
//  - the child leaves with _exit: no destructor of the parent's objects runs twice, no stdio
//    buffer is written twice.
// SIGTERM and SIGINT stay blocked in children (main blocked them before any thread started),
// so a signal sent to the process group reaches the parent only; children learn of the stop
// through the stop pipe, which also reaches end-of-file if the parent dies.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <thread>
#include <unordered_map>

#include "event/poll_set.hpp"
#include "models/children.hpp"
#include "models/classic_model.hpp"

namespace spoold {
namespace {

constexpr auto reap_interval = std::chrono::milliseconds(100);

class forking_model : public classic_model {
 public:
  explicit forking_model(server_context& ctx)
      : classic_model(ctx, {.blocking_accept = false, .log_flusher = false}) {}

 private:
  void start_threads() override {
    // One set of counters for the parent and every child: /metrics answers for the server.
    ctx_.counters.share_across_processes();
    spawn("spoold-accept", [this] { run(); });
  }

  void run();
  void accept_some();
  // Collects exited children; true if one was found. Blocking: waits for one first.
  bool reap(bool block);
  void shut_down();
  [[noreturn]] void child_main(accepted&& a);

  // Each child with its connection's place in its client's count, held here until the child
  // is reaped: the parent's count is the server's. Only the acceptor thread touches it.
  std::unordered_map<pid_t, client_slot> children_;
};

void forking_model::run() {
  poll_set set;
  while (!stop_.raised()) {
    set.clear();
    const std::size_t listen_index = set.add(listener_.fd(), POLLIN);
    const std::size_t stop_index = set.add(stop_.fd(), POLLIN);
    // While children live, wake now and then to reap them. (SIGCHLD cannot be waited for
    // here: the other threads do not block it, so it may be delivered to any of them.)
    const auto now = steady_clock::now();
    if (!set.wait(children_.empty() ? steady_clock::time_point::max() : now + reap_interval, now)) {
      std::perror("spoold: poll");
      break;
    }
    reap(false);
    if (set.revents(stop_index) != 0) break;
    if (set.revents(listen_index) != 0) accept_some();
  }
  shut_down();
}

void forking_model::accept_some() {
  const accept_outcome got = listener_.accept_pending(accepts_per_turn, [this](accepted&& a) {
    if (children_.size() >= ctx_.opts.max_connections) {
      refuse_connection(ctx_, std::move(a));
      return;
    }
    const pid_t pid = ::fork();
    if (pid == 0) child_main(std::move(a));
    if (pid < 0) {
      std::perror("spoold: fork");
      refuse_connection(ctx_, std::move(a));
      return;
    }
    ::close(a.fd);  // the child's now
    children_.emplace(pid, std::move(a.slot));
  });
  if (got == accept_outcome::exhausted || got == accept_outcome::failed) {
    stop_.wait_for(accept_pause);  // out of descriptors: let children finish first
  }
}

void forking_model::child_main(accepted&& a) {
  stop_.enter_child();
  // Without this the port would stay open in every child after the parent stops listening.
  listener_.close();
  serve(std::move(a), {.flush_log_when_idle = true});
  ::_exit(0);
}

bool forking_model::reap(bool block) {
  bool any = false;
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, block && !any ? 0 : WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return any;  // 0: none exited; -1 (ECHILD): none left
    any = true;
    children_.erase(pid);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && block) {
      continue;  // killed after the grace period, as said on stderr
    }
    if (WIFSIGNALED(status)) {
      std::fprintf(stderr, "spoold: connection process %d killed by signal %d\n",
                   static_cast<int>(pid), WTERMSIG(status));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "spoold: connection process %d exited with status %d\n",
                   static_cast<int>(pid), WEXITSTATUS(status));
    }
  }
}

void forking_model::shut_down() {
  // No new connections; the children saw the stop pipe and finish within the grace period.
  listener_.close();
  reap_then_kill(
      stop_.raised_at() + ctx_.opts.grace + kill_margin, "connection processes",
      [this] { return children_.size(); }, [this](bool block) { return reap(block); },
      [this](auto kill) {
        for (const auto& child : children_) kill(child.first);
      });
}

}  // namespace

std::unique_ptr<server_model> make_forking_model(server_context& ctx) {
  return make_stopped_on_destruction<forking_model>(ctx);
}

}  // namespace spoold
