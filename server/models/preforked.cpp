// Preforked: --workers processes (default two per core) forked at start, each looping
// accept -> serve on the shared listening socket, one connection at a time; the kernel wakes
// one blocked accept() per connection. The parent only supervises: it restarts a worker that
// dies, and at the stop shuts the listening socket down (waking every worker's accept()),
// closes the stop pipe (telling workers in a session to finish with Connection: close) and
// kills what is left after the grace period (README.md, "preforked").
//
// Fork safety is argued in forking.cpp and holds here for the same reasons: workers are forked
// by the supervisor thread, which never touches the store, the metrics or the access log, so no
// lock they use can be held in a child, and a worker never uses the pool. Each worker process
// has its own store connection, counters and access-log buffer (flushed by the worker).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <thread>
#include <vector>

#include "models/model.hpp"
#include "models/session.hpp"
#include "net.hpp"

namespace spoold {
namespace {

constexpr auto supervise_interval = std::chrono::milliseconds(100);
constexpr auto kill_margin = std::chrono::milliseconds(500);
// A worker that dies sooner than this after its start is restarted only after this long, so a
// worker that cannot run (say, a store it cannot open) does not turn into a fork loop.
constexpr auto restart_backoff = std::chrono::seconds(1);

unsigned default_workers() { return 2 * std::max(1u, std::thread::hardware_concurrency()); }

class preforked_model final : public server_model {
 public:
  explicit preforked_model(server_context& ctx) : ctx_(ctx) {}
  ~preforked_model() override {
    stop();
    wait();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  std::uint16_t start() override {
    listen_fd_ = listen_tcp(ctx_.opts.bind, ctx_.opts.port, /*reuse_port=*/false);
    set_blocking(listen_fd_, true);
    const std::uint16_t port = local_port(listen_fd_);
    // A worker serves one connection at a time: more of them than --max-connections would
    // serve more connections than it allows.
    const std::size_t wanted = ctx_.opts.workers != 0 ? ctx_.opts.workers : default_workers();
    workers_.resize(std::min<std::size_t>(wanted, ctx_.opts.max_connections));
    parent_ = ::getpid();
    supervisor_ = std::thread([this] { supervise(); });
    return port;
  }

  void stop() override {
    stop_.raise();
    stop_listening(listen_fd_);
  }

  void wait() override {
    if (supervisor_.joinable()) supervisor_.join();
  }

 private:
  struct worker {
    pid_t pid = -1;
    steady_clock::time_point started{};
    steady_clock::time_point restart_at{};  // when pid < 0: not before this
  };

  void supervise();
  void spawn(worker& w);
  bool reap(bool block);
  void shut_down();
  [[noreturn]] void worker_main();

  server_context& ctx_;
  stop_signal stop_;
  int listen_fd_ = -1;
  pid_t parent_ = -1;
  std::vector<worker> workers_;  // only the supervisor thread touches it
  std::thread supervisor_;
};

void preforked_model::supervise() {
  name_this_thread("spoold-superv");
  for (worker& w : workers_) spawn(w);
  while (!stop_.wait_for(supervise_interval)) {
    reap(false);
    const auto now = steady_clock::now();
    for (worker& w : workers_) {
      if (w.pid < 0 && now >= w.restart_at) spawn(w);
    }
  }
  shut_down();
}

void preforked_model::spawn(worker& w) {
  const pid_t pid = ::fork();
  if (pid == 0) worker_main();
  if (pid < 0) {
    std::perror("spoold: fork");
    w.restart_at = steady_clock::now() + restart_backoff;
    return;
  }
  w.pid = pid;
  w.started = steady_clock::now();
}

void preforked_model::worker_main() {
  stop_.enter_child();
  // A worker blocked in accept() would not notice its parent's death through the stop pipe
  // and would keep the port: die with the parent (checked after asking, in case it is late).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent_) ::_exit(1);
  while (!stop_.raised()) {
    int fd = -1;
    sockaddr_in peer{};
    const accept_outcome got = accept_connection(listen_fd_, stop_, fd, peer);
    if (got == accept_outcome::closed) break;
    if (got == accept_outcome::accepted) {
      serve_connection(ctx_, stop_, fd, peer, {.flush_log_when_idle = true});
    }
  }
  if (ctx_.log) ctx_.log->flush();
  ::_exit(0);
}

// Collects exited workers; true if one was found. Blocking: waits for one.
bool preforked_model::reap(bool block) {
  bool any = false;
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, block && !any ? 0 : WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return any;
    any = true;
    auto it = std::find_if(workers_.begin(), workers_.end(),
                           [pid](const worker& w) { return w.pid == pid; });
    if (it == workers_.end()) continue;
    it->pid = -1;
    const auto now = steady_clock::now();
    it->restart_at = now - it->started < restart_backoff ? now + restart_backoff : now;
    if (stop_.raised()) continue;
    if (WIFSIGNALED(status)) {
      std::fprintf(stderr, "spoold: worker %d killed by signal %d; restarting it\n",
                   static_cast<int>(pid), WTERMSIG(status));
    } else {
      std::fprintf(stderr, "spoold: worker %d exited with status %d; restarting it\n",
                   static_cast<int>(pid), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
  }
}

void preforked_model::shut_down() {
  auto alive = [this] {
    return std::count_if(workers_.begin(), workers_.end(), [](const worker& w) { return w.pid >= 0; });
  };
  const auto kill_at = stop_.raised_at() + ctx_.opts.grace + kill_margin;
  while (alive() > 0 && steady_clock::now() < kill_at) {
    if (!reap(false)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (alive() > 0) {
    std::fprintf(stderr, "spoold: killing %ld workers after the grace period\n",
                 static_cast<long>(alive()));
    for (const worker& w : workers_) {
      if (w.pid >= 0) ::kill(w.pid, SIGKILL);
    }
    while (alive() > 0 && reap(true)) {
    }
  }
}

}  // namespace

std::unique_ptr<server_model> make_preforked_model(server_context& ctx) {
  return std::make_unique<preforked_model>(ctx);
}

}  // namespace spoold
