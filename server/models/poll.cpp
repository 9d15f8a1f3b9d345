// The single-threaded poll() server: one thread, one poll() set holding the listening socket,
// the stop signal and every connection, each an http_session driven without blocking. The
// classic event loop before epoll: every turn rebuilds and scans the whole set (O(connections)
// per wake-up), and anything slow (a store call, which runs inline here) stalls every client
// (README.md).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "models/model.hpp"
#include "models/session.hpp"
#include "net.hpp"

namespace spoold {
namespace {

// Requests one connection may complete per turn before the others get theirs.
constexpr int requests_per_turn = 32;
// Connections accepted per turn, so a flood of new ones cannot starve the open ones.
constexpr int accepts_per_turn = 64;
constexpr auto tick = std::chrono::milliseconds(100);  // log flush, accept back-off

class poll_model final : public server_model {
 public:
  explicit poll_model(server_context& ctx) : ctx_(ctx) {}
  ~poll_model() override {
    stop();
    wait();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  std::uint16_t start() override {
    listen_fd_ = listen_tcp(ctx_.opts.bind, ctx_.opts.port, /*reuse_port=*/false);
    const std::uint16_t port = local_port(listen_fd_);
    thread_ = std::thread([this] { run(); });
    return port;
  }

  void stop() override { stop_.raise(); }

  void wait() override {
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run();
  void accept_some(steady_clock::time_point now);
  void begin_shutdown(steady_clock::time_point now);

  server_context& ctx_;
  stop_signal stop_;
  int listen_fd_ = -1;
  bool stopping_ = false;
  steady_clock::time_point accept_paused_until_{};
  std::vector<std::unique_ptr<http_session>> sessions_;
  std::thread thread_;
};

void poll_model::run() {
  name_this_thread("spoold-poll");
  std::vector<pollfd> fds;
  auto next_tick = steady_clock::now() + tick;
  for (;;) {
    auto now = steady_clock::now();
    std::erase_if(sessions_, [](const auto& s) { return s->closed(); });
    if (stopping_ && sessions_.empty()) break;

    // The set: [stop] [listen] sessions..., and the nearest deadline as the timeout.
    fds.clear();
    if (!stopping_) fds.push_back({stop_.fd(), POLLIN, 0});
    const bool listening = !stopping_ && now >= accept_paused_until_;
    if (listening) fds.push_back({listen_fd_, POLLIN, 0});
    const std::size_t first_session = fds.size();
    auto wake = next_tick;
    for (const auto& s : sessions_) {
      fds.push_back({s->fd(), s->interest(), 0});
      wake = s->has_ready_work() ? now : std::min(wake, s->deadline());
    }
    const auto timeout_ms =
        wake <= now ? 0 : std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout_ms));
    now = steady_clock::now();
    if (n < 0) {
      if (errno == EINTR) continue;
      std::perror("spoold: poll");
      stop_.raise();  // nothing sensible is left to do; close what is open within the grace
    }

    if (!stopping_ && (fds[0].revents != 0 || stop_.raised())) begin_shutdown(now);
    if (listening && !stopping_ && fds[1].revents != 0) accept_some(now);
    // Sessions accepted this turn are past the end of fds; they are polled next turn.
    const std::size_t polled = fds.size() - first_session;
    for (std::size_t i = 0; i < polled && i < sessions_.size(); ++i) {
      http_session& s = *sessions_[i];
      if (n > 0 && fds[first_session + i].revents != 0) {
        s.on_ready(fds[first_session + i].revents, now);
      }
      if (s.has_ready_work()) s.serve(requests_per_turn, now);
      s.on_deadline(now);
    }
    if (now >= next_tick) {
      if (ctx_.log) ctx_.log->flush();
      next_tick = now + tick;
    }
  }
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
}

void poll_model::begin_shutdown(steady_clock::time_point now) {
  stopping_ = true;
  // New connections are refused from here on; the open ones finish within the grace period.
  ::close(listen_fd_);
  listen_fd_ = -1;
  for (const auto& s : sessions_) s->on_stop(now);
}

void poll_model::accept_some(steady_clock::time_point now) {
  for (int i = 0; i < accepts_per_turn; ++i) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == EPERM) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors (or worse): leave the socket out of the set for a moment instead
      // of spinning on it; pending connections wait in the backlog meanwhile.
      std::perror("spoold: accept4");
      accept_paused_until_ = now + tick;
      return;
    }
    if (sessions_.size() >= ctx_.opts.max_connections) {
      refuse_connection(ctx_, fd);
      continue;
    }
    try {
      sessions_.push_back(std::make_unique<http_session>(ctx_, stop_, fd, peer));
    } catch (const std::bad_alloc&) {
      refuse_connection(ctx_, fd);
    }
  }
}

}  // namespace

std::unique_ptr<server_model> make_poll_model(server_context& ctx) {
  return std::make_unique<poll_model>(ctx);
}

}  // namespace spoold
