// The single-threaded poll() server: one thread, one poll() set holding the listening socket,
// the stop signal and every connection, each driven without blocking. The classic event loop
// before epoll: every turn rebuilds and scans the whole set (O(connections) per wake-up), and
// anything slow (a store call, which runs inline here) stalls every client (README.md).
// Deadlines live in a timer heap, as in the epoll loops (event/timer_heap.hpp): each turn arms
// every connection it polled at its deadline (a comparison unless the deadline moved
// earlier), and only the connections the heap says are due are asked to act on it.
#include <poll.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <memory>
#include <vector>

#include "conn/connection.hpp"
#include "event/poll_set.hpp"
#include "event/timer_heap.hpp"
#include "models/classic_model.hpp"
#include "models/loop_chores.hpp"

namespace spoold {
namespace {

struct poll_connection final : connection {
  using connection::connection;
  timer_node timer;  // in the loop's timer heap: due at deadline() or earlier
};

class poll_model : public classic_model {
 public:
  explicit poll_model(server_context& ctx)
      : classic_model(ctx, {.blocking_accept = false, .log_flusher = false}), driver_(stop_) {}

 private:
  void start_threads() override {
    if (ctx_.opts.tls_port) {
      tls_listener_.open(ctx_, *ctx_.opts.tls_port, /*blocking=*/false, false, /*tls=*/true);
      ctx_.tls_port = tls_listener_.port();
    }
    spawn("spoold-poll", [this] { run(); });
  }

  void run();
  void accept_some(listener& from, steady_clock::time_point now);
  void begin_shutdown(steady_clock::time_point now);

  inline_driver driver_;
  listener tls_listener_;  // open with --tls-port only
  bool stopping_ = false;
  steady_clock::time_point accept_paused_until_{};
  std::vector<std::unique_ptr<poll_connection>> connections_;
  timer_heap<poll_connection> timers_;
  loop_chores chores_{ctx_.log};
};

void poll_model::run() {
  poll_set set;
  for (;;) {
    auto now = steady_clock::now();
    const auto gone = [this](const std::unique_ptr<poll_connection>& c) {
      if (!c->closed()) return false;
      timers_.disarm(*c);
      return true;
    };
    if (std::erase_if(connections_, gone) > 0) {
      chores_.connections_deleted();
    }
    if (stopping_ && connections_.empty()) break;

    // The set: [stop] [listen] connections..., and the nearest deadline as the timeout: the
    // timer heap's, the chores', the end of an accept pause; with none, until an event.
    set.clear();
    const std::size_t none = std::numeric_limits<std::size_t>::max();
    const std::size_t stop_index = stopping_ ? none : set.add(stop_.fd(), POLLIN);
    const bool listening = !stopping_ && now >= accept_paused_until_;
    const bool tls_listening = listening && tls_listener_.fd() >= 0;
    const std::size_t listen_index = listening ? set.add(listener_.fd(), POLLIN) : none;
    const std::size_t tls_index = tls_listening ? set.add(tls_listener_.fd(), POLLIN) : none;
    const std::size_t first = set.size();  // connections_[i] is at first + i
    auto wake = std::min(timers_.next(), chores_.next(connections_.size()));
    if (!stopping_ && !listening) wake = std::min(wake, accept_paused_until_);
    for (const auto& c : connections_) {
      set.add(c->fd(), c->interest());
      if (c->has_ready_work()) wake = now;
    }
    if (!set.wait(wake, now)) {
      std::perror("spoold: poll");
      stop_.raise();  // nothing sensible is left to do; close what is open within the grace
    }
    now = steady_clock::now();

    if (!stopping_ && (set.revents(stop_index) != 0 || stop_.raised())) begin_shutdown(now);
    if (listening && !stopping_ && set.revents(listen_index) != 0) accept_some(listener_, now);
    if (tls_listening && !stopping_ && set.revents(tls_index) != 0) {
      accept_some(tls_listener_, now);
    }
    // Connections accepted this turn are past the end of the set; they are polled next turn.
    const std::size_t polled = set.size() - first;
    for (std::size_t i = 0; i < polled && i < connections_.size(); ++i) {
      poll_connection& c = *connections_[i];
      if (const short revents = set.revents(first + i); revents != 0) c.on_poll(revents, now);
      if (c.has_ready_work()) c.serve(requests_per_turn, now);
      if (!c.closed()) timers_.arm(c, c.deadline());
    }
    // Each is armed at its deadline or earlier; one whose deadline moved later since finds
    // nothing due and is armed again at the true one.
    while (poll_connection* c = timers_.pop_due(now)) {
      c->on_deadline(now);
      if (!c->closed()) timers_.arm(*c, c->deadline());
    }
    chores_.run(connections_.size(), now);
  }
  listener_.close();
  tls_listener_.close();
}

void poll_model::begin_shutdown(steady_clock::time_point now) {
  stopping_ = true;
  // New connections are refused from here on; the open ones finish within the grace period.
  listener_.close();
  tls_listener_.close();
  for (const auto& c : connections_) {
    c->on_stop(now, stop_.raised_at() + ctx_.opts.grace);
    if (!c->closed()) timers_.arm(*c, c->deadline());
  }
}

void poll_model::accept_some(listener& from, steady_clock::time_point now) {
  const accept_outcome got = from.accept_pending(accepts_per_turn, [&](accepted&& a) {
    if (connections_.size() >= ctx_.opts.max_connections) {
      refuse_connection(ctx_, std::move(a));
      return;
    }
    std::unique_ptr<poll_connection> c;
    try {
      connections_.reserve(connections_.size() + 1);  // so that the push below cannot throw
      c = std::make_unique<poll_connection>(ctx_, driver_, std::move(a), now);
    } catch (const std::bad_alloc&) {
      refuse_connection(ctx_, std::move(a));
      return;
    }
    try {
      timers_.arm(*c, c->deadline());
    } catch (const std::bad_alloc&) {
      return;  // c closes the connection as it is destroyed, as the epoll loop's does
    }
    connections_.push_back(std::move(c));
  });
  // Out of descriptors (or worse): leave the socket out of the set for a moment instead of
  // spinning on it; pending connections wait in the backlog meanwhile.
  if (got == accept_outcome::exhausted || got == accept_outcome::failed) {
    accept_paused_until_ = now + accept_pause;
  }
}

}  // namespace

std::unique_ptr<server_model> make_poll_model(server_context& ctx) {
  return make_stopped_on_destruction<poll_model>(ctx);
}

}  // namespace spoold
