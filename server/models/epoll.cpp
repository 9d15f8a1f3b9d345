// The default model: one event loop per core, each with its own SO_REUSEPORT listening socket,
// and libspool for everything that may block (store calls). See server/models/README.md for
// the loop's turn and why no request is lost at shutdown.
//
// Time. Each connection's deadline (connection::deadline) is armed in the loop's timer heap
// after every step that may change it (event/timer_heap.hpp: moved earlier at once, later
// only when the earlier one fires). The loop sleeps in epoll_wait until its earliest timer, its
// chores (the access log, the memory trim: loop_chores.hpp), the end of an accept pause or of
// the grace period; with none of these, until an event. So an idle loop makes no wake-ups.
//
// Its core. A loop that has held it for --loop-slice without a context switch yields it before
// its next wait (event/run_slice.hpp): under steady load the loop never blocks, and a thread
// that shares its core would otherwise wait for a scheduler tick.
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "conn/connection.hpp"
#include "conn/listener.hpp"
#include "event/run_slice.hpp"
#include "event/stop_signal.hpp"
#include "event/timer_heap.hpp"
#include "event/wakeup.hpp"
#include "models/loop_chores.hpp"
#include "models/model.hpp"
#include "thread_name.hpp"

namespace spoold {
namespace {

constexpr int max_events = 256;

// A connection and what its loop keeps about it. Each belongs to the loop that accepted it for
// its whole life; only that loop's thread touches it.
struct loop_connection final : connection {
  using connection::connection;

  loop_connection* prev = nullptr;
  loop_connection* next = nullptr;
  timer_node timer;     // in the loop's timer heap: due at deadline() or earlier
  bool queued = false;  // on the loop's ready list
  bool dead = false;    // unlinked; deleted at the end of the loop's turn
};

struct completion {
  loop_connection* conn;
  http::response response;
};

// The driver of its connections: runs their blocking jobs on the pool and resumes them when the
// answer comes back (through done_ and the eventfd).
class event_loop final : public connection_driver {
 public:
  event_loop(server_context& ctx, const stop_signal& stop, connection_budget& budget, int index);
  ~event_loop();

  void open_listener(std::uint16_t port) {
    listener_.open(ctx_, port, /*blocking=*/false, /*reuse_port=*/true, ctx_.opts.tls_only);
  }
  // --tls-port: a second listener, whose connections speak TLS.
  void open_tls_listener(std::uint16_t port) {
    tls_listener_.open(ctx_, port, /*blocking=*/false, /*reuse_port=*/true, /*tls=*/true);
  }
  [[nodiscard]] std::uint16_t port() const noexcept { return listener_.port(); }
  [[nodiscard]] std::uint16_t tls_port() const noexcept { return tls_listener_.port(); }
  void start();
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  // Wakes the loop from epoll_wait (another thread: the stop, a completion).
  void wake() const;

  std::optional<http::response> run_job(connection& c, blocking_job&& job) override;

 private:
  // From a pool worker: the blocking job of `c` produced `r`.
  void complete(loop_connection* c, http::response r);
  void run();
  void accept_all(listener& from, steady_clock::time_point now);
  void watch_listeners();
  void pause_accepting(steady_clock::time_point now);
  void drain_completions(steady_clock::time_point now);
  void on_event(loop_connection* c, std::uint32_t events, steady_clock::time_point now);
  void drive(loop_connection* c, steady_clock::time_point now);
  void free_if_unreferenced(loop_connection* c);
  void bury_dead();
  void fire_timers(steady_clock::time_point now);
  [[nodiscard]] steady_clock::time_point wake_at() const noexcept;
  void begin_shutdown(steady_clock::time_point now);
  void enqueue(loop_connection* c);

  server_context& ctx_;
  connection_budget& budget_;
  int index_;
  listener listener_;
  listener tls_listener_;  // open with --tls-port only
  int epoll_fd_ = -1;
  wakeup wake_;  // a completion arrived, or the stop
  bool listening_ = true;
  bool shutdown_started_ = false;
  steady_clock::time_point grace_deadline_{};
  steady_clock::time_point accept_paused_until_{};
  timer_heap<loop_connection> timers_;
  loop_chores chores_;
  // Every connection object, open or closed. A closed one stays listed until neither a pool job
  // nor the ready list refers to it (free_if_unreferenced), and is deleted only at the end of
  // the loop's turn (bury_dead): the turn's epoll_event array may still name it.
  loop_connection* connections_ = nullptr;
  std::vector<loop_connection*> dead_;
  std::vector<loop_connection*> ready_;  // connections with more pipelined work
  std::vector<loop_connection*> ready_turn_;
  std::mutex done_mu_;
  std::vector<completion> done_;
  std::thread thread_;
};

class epoll_model : public server_model {
 public:
  explicit epoll_model(server_context& ctx) : ctx_(ctx), budget_(ctx.opts.max_connections) {}

  std::uint16_t start() override {
    const unsigned loops = ctx_.opts.loops == 0 ? 1 : ctx_.opts.loops;
    std::uint16_t port = ctx_.opts.port;
    std::uint16_t tls_port = ctx_.opts.tls_port.value_or(0);
    for (unsigned i = 0; i < loops; ++i) {
      loops_.push_back(std::make_unique<event_loop>(ctx_, stop_, budget_, static_cast<int>(i)));
      loops_.back()->open_listener(port);
      port = loops_.back()->port();  // the next loops bind the port the first one got
      if (ctx_.opts.tls_port) {
        loops_.back()->open_tls_listener(tls_port);
        tls_port = loops_.back()->tls_port();
      }
    }
    if (ctx_.opts.tls_only) ctx_.tls_port = port;
    if (ctx_.opts.tls_port) ctx_.tls_port = tls_port;
    for (auto& loop : loops_) loop->start();
    return port;
  }

  void stop() override {
    stop_.raise();
    for (auto& loop : loops_) loop->wake();
  }

  void wait() override {
    for (auto& loop : loops_) loop->join();
  }

 private:
  server_context& ctx_;
  stop_signal stop_;
  connection_budget budget_;  // --max-connections, shared by every loop
  std::vector<std::unique_ptr<event_loop>> loops_;
};

// Tags for the descriptors that are not connections.
char listen_tag;
char tls_listen_tag;
char wake_tag;

void check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(errno, std::generic_category(), what);
}

// The calling thread's context switches so far, voluntary and involuntary (run_slice.hpp).
// getrusage cannot fail for RUSAGE_THREAD with a valid buffer; were it to, the count reads 0
// and stays put, and the loop yields once a slice while busy or not.
std::uint64_t context_switches() noexcept {
  rusage r{};
  if (::getrusage(RUSAGE_THREAD, &r) != 0) return 0;
  return static_cast<std::uint64_t>(r.ru_nvcsw) + static_cast<std::uint64_t>(r.ru_nivcsw);
}

event_loop::event_loop(server_context& ctx, const stop_signal& stop, connection_budget& budget,
                       int index)
    : connection_driver(stop, &budget),
      ctx_(ctx),
      budget_(budget),
      index_(index),
      chores_(ctx.log) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  check(epoll_fd_, "epoll_create1");
}

event_loop::~event_loop() {
  join();
  // The pool has been drained by now (server_model::wait's contract): jobs of connections
  // closed at the grace deadline completed into done_, which owns nothing but responses.
  done_.clear();
  bury_dead();
  while (connections_ != nullptr) {
    loop_connection* c = connections_;
    connections_ = c->next;
    delete c;
  }
  ::close(epoll_fd_);
}

void event_loop::start() {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &listen_tag;
  check(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listener_.fd(), &ev), "epoll_ctl listen");
  if (tls_listener_.fd() >= 0) {
    ev.data.ptr = &tls_listen_tag;
    check(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, tls_listener_.fd(), &ev), "epoll_ctl listen");
  }
  ev.data.ptr = &wake_tag;
  check(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_.fd(), &ev), "epoll_ctl eventfd");
  thread_ = std::thread([this] { run(); });
}

void event_loop::wake() const { wake_.signal(); }

std::optional<http::response> event_loop::run_job(connection& c, blocking_job&& job) {
  auto* conn = static_cast<loop_connection*>(&c);
  std::error_code err = ctx_.pool.try_post(
      [this, conn, job = std::move(job)]() mutable { complete(conn, run_job_here(job)); });
  if (err) return http::error_response(503, "The server is overloaded or stopping.");
  return std::nullopt;
}

void event_loop::complete(loop_connection* c, http::response r) {
  bool was_empty;
  {
    std::lock_guard lock(done_mu_);
    was_empty = done_.empty();
    done_.push_back({c, std::move(r)});
  }
  // One wake-up per batch: a non-empty list means a wake-up is already on its way.
  if (was_empty) wake();
}

void event_loop::run() {
  name_this_thread("spoold-loop-" + std::to_string(index_));
  epoll_event events[max_events];
  run_slice slice(ctx_.opts.loop_slice, steady_clock::now(), context_switches());
  for (;;) {
    steady_clock::time_point before = steady_clock::now();
    if (slice.due(before) && slice.held_core(before, context_switches())) {
      ::sched_yield();
      ctx_.counters.loop_yielded();
      before = steady_clock::now();
      slice.yielded(before, context_switches());
    }
    int timeout_ms = 0;
    if (ready_.empty()) {
      const steady_clock::time_point until = wake_at();
      timeout_ms = until == steady_clock::time_point::max() ? -1 : poll_timeout(until, before);
    }
    const int n = ::epoll_wait(epoll_fd_, events, max_events, timeout_ms);
    if (n < 0 && errno != EINTR) {
      std::perror("spoold: epoll_wait");
      break;
    }
    const auto now = steady_clock::now();
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &listen_tag) {
        accept_all(listener_, now);
      } else if (tag == &tls_listen_tag) {
        accept_all(tls_listener_, now);
      } else if (tag == &wake_tag) {
        wake_.drain();
        drain_completions(now);
      } else {
        auto* c = static_cast<loop_connection*>(tag);
        on_event(c, events[i].events, now);
        free_if_unreferenced(c);  // a connection the event closed
      }
    }
    // Connections that yielded after requests_per_turn requests, or were resumed.
    ready_turn_.swap(ready_);
    for (loop_connection* c : ready_turn_) {
      c->queued = false;
      drive(c, now);
      free_if_unreferenced(c);
    }
    ready_turn_.clear();
    fire_timers(now);
    // Nothing of this turn (its events, its ready list) refers to a connection any more.
    bury_dead();
    if (stopping() && !shutdown_started_) begin_shutdown(now);
    if (!listening_ && !shutdown_started_ && now >= accept_paused_until_) watch_listeners();
    chores_.run(open_connections(), now);
    if (shutdown_started_) {
      if (open_connections() == 0) break;
      if (now >= grace_deadline_) {
        // The grace period is over: close what is left. Pending jobs still hold their
        // connection objects; the completions are dropped with the loop.
        for (loop_connection* c = connections_; c != nullptr; c = c->next) c->close();
        break;
      }
    }
  }
}

// The earliest moment the loop has something to do without an event.
steady_clock::time_point event_loop::wake_at() const noexcept {
  steady_clock::time_point at = std::min(timers_.next(), chores_.next(open_connections()));
  if (!listening_ && !shutdown_started_) at = std::min(at, accept_paused_until_);
  if (shutdown_started_) at = std::min(at, grace_deadline_);
  return at;
}

// The connections whose deadline has come. Each was armed at deadline() or earlier; one that
// is not due yet (its deadline moved later since) is armed again at the true one.
void event_loop::fire_timers(steady_clock::time_point now) {
  while (loop_connection* c = timers_.pop_due(now)) {
    c->on_deadline(now);
    if (c->closed()) {
      free_if_unreferenced(c);
      continue;
    }
    timers_.arm(*c, c->deadline());
    if (c->has_ready_work()) enqueue(c);
  }
}

void event_loop::begin_shutdown(steady_clock::time_point now) {
  shutdown_started_ = true;
  grace_deadline_ = now + ctx_.opts.grace;
  listener_.close();  // also leaves the epoll set
  tls_listener_.close();
  listening_ = false;
  // Idle connections go now; the others close after their current response (they answer with
  // Connection: close once stopping() is true).
  for (loop_connection* c = connections_; c != nullptr; c = c->next) {
    if (c->closed()) continue;
    c->on_stop(now, grace_deadline_);
    timers_.arm(*c, c->deadline());
    if (c->has_ready_work()) enqueue(c);
  }
}

void event_loop::accept_all(listener& from, steady_clock::time_point now) {
  if (!listening_) return;
  const accept_outcome got = from.accept_pending(accepts_per_turn, [&](accepted&& a) {
    if (!budget_.admit()) {
      refuse_connection(ctx_, std::move(a));
      return;
    }
    auto* c = new loop_connection(ctx_, *this, std::move(a), now);
    try {
      timers_.arm(*c, c->deadline());
    } catch (const std::bad_alloc&) {
      delete c;  // closes it, and gives back its place in the budget
      return;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = c;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd(), &ev) != 0) {
      std::perror("spoold: epoll_ctl add");
      timers_.disarm(*c);
      delete c;  // closes it, and gives back its place in the budget
      return;
    }
    c->next = connections_;
    if (connections_ != nullptr) connections_->prev = c;
    connections_ = c;
  });
  if (got == accept_outcome::exhausted || got == accept_outcome::failed) pause_accepting(now);
}

// Out of descriptors: stop watching the listening socket for a moment instead of spinning on it
// (it is level-triggered); the loop turns it back on when the pause is over (wake_at). Pending
// connections wait in the backlog.
void event_loop::pause_accepting(steady_clock::time_point now) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listener_.fd(), nullptr);
  if (tls_listener_.fd() >= 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, tls_listener_.fd(), nullptr);
  listening_ = false;
  accept_paused_until_ = now + accept_pause;
}

void event_loop::on_event(loop_connection* c, std::uint32_t events, steady_clock::time_point now) {
  if ((events & (EPOLLRDHUP | EPOLLHUP)) != 0) c->on_peer_end();
  c->on_io((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0,
           (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0, now);
  drive(c, now);
}

// One turn of a connection: at most requests_per_turn requests, then the back of the ready list
// if it has more.
void event_loop::drive(loop_connection* c, steady_clock::time_point now) {
  if (c->closed()) return;
  c->serve(requests_per_turn, now);
  if (c->has_ready_work()) enqueue(c);
  // Every step that may move the deadline earlier ends here (an event, a completion, a turn
  // from the ready list); arm() is a comparison when it moved later.
  timers_.arm(*c, c->deadline());
}

void event_loop::drain_completions(steady_clock::time_point now) {
  std::vector<completion> done;
  {
    std::lock_guard lock(done_mu_);
    done.swap(done_);
  }
  for (auto& [c, response] : done) {
    c->job_done(std::move(response));
    drive(c, now);  // pipelined requests behind it; also sends the answer
    free_if_unreferenced(c);
  }
}

void event_loop::enqueue(loop_connection* c) {
  if (c->queued) return;
  c->queued = true;
  ready_.push_back(c);
}

// Unlinks a closed connection that no job and no ready-list entry refers to. It is deleted
// later, by bury_dead() at the end of the turn: an event for it may come later in the same
// epoll_wait batch (a completion closed it, then its EPOLLIN is handled), and on_io must
// still find it closed there, not freed memory.
void event_loop::free_if_unreferenced(loop_connection* c) {
  if (!c->closed() || c->job_pending() || c->queued || c->dead) return;
  timers_.disarm(*c);
  if (c->prev != nullptr) c->prev->next = c->next;
  if (c->next != nullptr) c->next->prev = c->prev;
  if (connections_ == c) connections_ = c->next;
  c->dead = true;
  dead_.push_back(c);
}

void event_loop::bury_dead() {
  if (dead_.empty()) return;
  for (loop_connection* c : dead_) delete c;
  dead_.clear();
  chores_.connections_deleted();
}

void event_loop::watch_listeners() {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &listen_tag;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listener_.fd(), &ev) != 0) return;
  listening_ = true;
  if (tls_listener_.fd() >= 0) {
    ev.data.ptr = &tls_listen_tag;
    (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, tls_listener_.fd(), &ev);
  }
}

}  // namespace

std::unique_ptr<server_model> make_epoll_model(server_context& ctx) {
  return make_stopped_on_destruction<epoll_model>(ctx);
}

}  // namespace spoold
