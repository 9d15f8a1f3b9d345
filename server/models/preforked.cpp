// Preforked: --workers processes (default two per core) forked at start, each looping
// accept -> serve on the shared listening socket, one connection at a time; the kernel wakes
// one blocked accept() per connection. The parent only supervises: it restarts a worker that
// dies, and at the stop shuts the listening socket down (waking every worker's accept()),
// closes the stop pipe (telling workers serving a connection to finish it with Connection:
// close) and kills what is left after the grace period (README.md, "preforked").
//
// Fork safety is argued in forking.cpp and holds here for the same reasons: workers are forked
// by the supervisor thread, which never touches the store, the metrics or the access log, so no
// lock they use can be held in a child, and a worker never uses the pool. Each worker process
// has its own store connection and access-log buffer (flushed by the worker); they share the
// counters behind /metrics (metrics::share_across_processes), the count of connections being
// served (shared_counts), for --max-connections, and the connections per client
// (shared_client_counts), for --max-connections-per-client. While every worker holds a
// connection and a client waits, a worker whose connection only waits on its client gives it up
// (worker_pressure.hpp), so that slow clients cannot hold every worker.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "event/poll_set.hpp"
#include "limits/client_limits.hpp"
#include "limits/worker_pressure.hpp"
#include "models/children.hpp"
#include "models/classic_model.hpp"
#include "shared_mapping.hpp"

namespace spoold {
namespace {

// How often the supervisor looks for exited workers where the kernel has no pidfd_open (before
// Linux 5.3); with it, the supervisor sleeps until a worker exits.
constexpr auto supervise_interval = std::chrono::milliseconds(100);
// A worker that dies sooner than this after its start is restarted only after this long, so a
// worker that cannot run (say, a store it cannot open) does not turn into a fork loop.
constexpr auto restart_backoff = std::chrono::seconds(1);

unsigned default_workers() { return 2 * std::max(1u, std::thread::hardware_concurrency()); }

// Counters every worker process and the supervisor share (an anonymous MAP_SHARED mapping):
// connections being served, for --max-connections, and which worker holds one, so that the
// supervisor can take back the count of a worker that died in a connection. Lock-free atomics
// work across processes; locked ones would not.
using shared_counter = std::atomic<std::uint32_t>;
static_assert(shared_counter::is_always_lock_free);

class shared_counts {
 public:
  // Every counter starts at zero.
  explicit shared_counts(std::size_t workers) : slots_(workers + 1, "mmap (worker counts)") {}

  // In worker `i`: true if the connection may be served; then leave() must follow.
  bool enter(std::size_t i, std::size_t max) {
    if (slots_[0].fetch_add(1, std::memory_order_relaxed) >= max) {
      slots_[0].fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    slots_[i + 1].store(1, std::memory_order_relaxed);
    return true;
  }
  void leave(std::size_t i) {
    slots_[i + 1].store(0, std::memory_order_relaxed);
    slots_[0].fetch_sub(1, std::memory_order_relaxed);
  }
  // Workers serving a connection now.
  [[nodiscard]] std::size_t busy() const noexcept {
    return slots_[0].load(std::memory_order_relaxed);
  }
  // In the supervisor, for a worker that has exited.
  void forget(std::size_t i) {
    if (slots_[i + 1].exchange(0, std::memory_order_relaxed) != 0) {
      slots_[0].fetch_sub(1, std::memory_order_relaxed);
    }
  }

 private:
  shared_array<shared_counter> slots_;  // [0]: busy workers; [i + 1]: worker i is busy
};

class preforked_model : public classic_model {
 public:
  // No log flusher: the parent writes no log lines, and a flusher thread holding the access
  // log's mutex at a fork would leave it locked in the new worker (each worker flushes itself).
  explicit preforked_model(server_context& ctx)
      : classic_model(ctx, {.blocking_accept = true, .log_flusher = false}) {}

 private:
  void start_threads() override {
    // One set of counters for the parent and every child: /metrics answers for the server.
    ctx_.counters.share_across_processes();
    workers_.resize(ctx_.opts.workers != 0 ? ctx_.opts.workers : default_workers());
    counts_.emplace(workers_.size());
    pressure_.emplace([this] { return counts_->busy(); }, workers_.size(), listener_.fd());
    // --max-connections-per-client for the server, not per worker: the workers count into one
    // shared table, each publishing what it holds so that a dead worker's count comes back.
    if (ctx_.clients != nullptr && ctx_.opts.max_connections_per_client > 0) {
      client_counts_.emplace(workers_.size());
      ctx_.clients->share_connection_counts(&*client_counts_);
    }
    parent_ = ::getpid();
    spawn("spoold-superv", [this] { supervise(); });
  }

  struct worker {
    pid_t pid = -1;
    int pidfd = -1;  // readable once the process has exited; -1 without pidfd_open
    steady_clock::time_point started{};
    steady_clock::time_point restart_at{};  // when pid < 0: not before this
  };

  void supervise();
  void fork_worker(std::size_t index);
  bool reap(bool block);
  void shut_down();
  [[noreturn]] void worker_main(std::size_t index);

  pid_t parent_ = -1;
  std::vector<worker> workers_;  // only the supervisor thread touches it
  std::optional<shared_counts> counts_;
  std::optional<worker_pressure> pressure_;            // every worker's copy reads counts_
  std::optional<shared_client_counts> client_counts_;  // --max-connections-per-client
};

void preforked_model::supervise() {
  for (std::size_t i = 0; i < workers_.size(); ++i) fork_worker(i);
  // Sleeps until the stop, a worker's exit (its pidfd turns readable) or the next restart due;
  // a worker without a pidfd makes it look every supervise_interval instead.
  poll_set set;
  for (;;) {
    set.clear();
    set.add(stop_.fd(), POLLIN);
    auto wake = steady_clock::time_point::max();
    for (const worker& w : workers_) {
      if (w.pid < 0) {
        wake = std::min(wake, w.restart_at);
      } else if (w.pidfd >= 0) {
        set.add(w.pidfd, POLLIN);
      } else {
        wake = std::min(wake, steady_clock::now() + supervise_interval);
      }
    }
    // What woke it is read below as it is: the stop, and which children exited (reap).
    if (!set.wait(wake, steady_clock::now())) {
      std::perror("spoold: poll (supervisor)");
      if (stop_.wait_for(supervise_interval)) break;  // look by period rather than spin
    }
    if (stop_.raised()) break;
    reap(false);
    const auto after = steady_clock::now();
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (workers_[i].pid < 0 && after >= workers_[i].restart_at) fork_worker(i);
    }
  }
  shut_down();
}

void preforked_model::fork_worker(std::size_t index) {
  worker& w = workers_[index];
  const pid_t pid = ::fork();
  if (pid == 0) worker_main(index);
  if (pid < 0) {
    std::perror("spoold: fork");
    w.restart_at = steady_clock::now() + restart_backoff;
    return;
  }
  w.pid = pid;
  w.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // -1: looked for by period
  w.started = steady_clock::now();
}

void preforked_model::worker_main(std::size_t index) {
  stop_.enter_child();
  // A worker blocked in accept() would not notice its parent's death through the stop pipe
  // and would keep the port: die with the parent (checked after asking, in case it is late).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent_) ::_exit(1);
  for (const worker& w : workers_) {
    if (w.pidfd >= 0) ::close(w.pidfd);  // the supervisor's, inherited through fork()
  }
  if (client_counts_) ctx_.clients->set_holder(static_cast<long>(index));
  accept_loop([this, index](accepted&& a) {
    // Only with more workers than --max-connections can a worker be free to refuse.
    if (!counts_->enter(index, ctx_.opts.max_connections)) {
      refuse_connection(ctx_, std::move(a));
      return;
    }
    serve(std::move(a), {.flush_log_when_idle = true, .pressure = &*pressure_});
    counts_->leave(index);
  });
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
    if (it->pidfd >= 0) {
      ::close(it->pidfd);
      it->pidfd = -1;
    }
    const auto index = static_cast<std::size_t>(it - workers_.begin());
    counts_->forget(index);
    if (client_counts_) client_counts_->release_holder(index);
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
  reap_then_kill(
      stop_.raised_at() + ctx_.opts.grace + kill_margin, "workers",
      [this] {
        return std::count_if(workers_.begin(), workers_.end(),
                             [](const worker& w) { return w.pid >= 0; });
      },
      [this](bool block) { return reap(block); },
      [this](auto kill) {
        for (const worker& w : workers_) {
          if (w.pid >= 0) kill(w.pid);
        }
      });
}

}  // namespace

std::unique_ptr<server_model> make_preforked_model(server_context& ctx) {
  return make_stopped_on_destruction<preforked_model>(ctx);
}

}  // namespace spoold
