#include "models/handshake_stage.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "conn/connection.hpp"
#include "conn/tls.hpp"
#include "event/poll_set.hpp"
#include "thread_name.hpp"

namespace spoold {

struct handshake_stage::pending {
  accepted a;
  std::unique_ptr<tls_transport> t;
  // Answered plain HTTP: the socket, taken from `a`, read until the client closes, as a
  // connection lingers after its last answer (linger_time at most).
  std::optional<socket_transport> lingering;
  steady_clock::time_point deadline;
  [[nodiscard]] int fd() const noexcept { return lingering ? lingering->fd() : a.fd; }
};

handshake_stage::handshake_stage(server_context& ctx, const stop_signal& stop,
                                 std::function<void(accepted&&)> ready,
                                 std::function<void()> dropped)
    : ctx_(ctx), stop_(stop), ready_(std::move(ready)), dropped_(std::move(dropped)) {}

handshake_stage::~handshake_stage() { join(); }

void handshake_stage::start() {
  wake_.emplace();
  thread_ = std::thread([this] {
    name_this_thread("spoold-tls-hs");
    run();
  });
}

void handshake_stage::join() {
  if (thread_.joinable()) thread_.join();
}

void handshake_stage::add(accepted&& a) {
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      incoming_.push_back(std::move(a));
      wake_->signal();
      return;
    }
  }
  discard(a);
}

void handshake_stage::take_incoming(steady_clock::time_point now) {
  std::vector<accepted> taken;
  {
    std::lock_guard lock(mu_);
    taken.swap(incoming_);
  }
  for (accepted& a : taken) {
    auto p = std::make_unique<pending>();
    SSL* ssl = ctx_.tls->new_ssl(a.fd);
    p->a = std::move(a);
    p->deadline = now + ctx_.opts.header_timeout;
    if (ssl == nullptr) {
      drop(*p);
      continue;
    }
    p->t = std::make_unique<tls_transport>(p->a.fd, ssl);
    // The ClientHello has often arrived with the connection: try at once.
    if (progress(*p, POLLIN, now)) pending_.push_back(std::move(p));
  }
}

bool handshake_stage::progress(pending& p, short revents, steady_clock::time_point now) {
  if (p.lingering) {
    if (read_away(*p.lingering) == io_status::again) return true;
    drop(p);  // the client closed: it has the answer
    return false;
  }
  (void)revents;
  const io_status s = p.t->handshake();
  if (s == io_status::again) return true;
  if (s == io_status::ok) {
    ctx_.counters.tls_handshake_done(p.t->resumed());
    p.a.ssl = p.t->release();
    p.t.reset();
    ready_(std::move(p.a));
    return false;
  }
  if (p.t->failed() && p.t->failure() == tls_failure::plaintext) {
    ctx_.counters.tls_handshake_failed(static_cast<std::size_t>(tls_failure::plaintext));
    ctx_.counters.record_response(400, plaintext_response.size());
    p.t.reset();
    p.lingering.emplace(std::exchange(p.a.fd, -1));
    // The answer fits an empty socket buffer; then no more bytes go this way.
    (void)p.lingering->write(plaintext_response.data(), plaintext_response.size(), false);
    (void)p.lingering->shutdown_write();
    p.deadline = now + linger_time;
    return progress(p, POLLIN, now);
  }
  ctx_.counters.tls_handshake_failed(
      static_cast<std::size_t>(p.t->failed() ? p.t->failure() : tls_failure::closed));
  drop(p);
  return false;
}

void handshake_stage::drop(pending& p) noexcept {
  p.t.reset();
  p.lingering.reset();  // closes the socket it took
  discard(p.a);
}

void handshake_stage::discard(accepted& a) noexcept {
  a.slot.release();
  if (a.fd >= 0) ::close(a.fd);
  a.fd = -1;
  dropped_();
}

void handshake_stage::run() {
  poll_set set;
  for (;;) {
    auto now = steady_clock::now();
    take_incoming(now);
    if (stop_.raised()) break;
    set.clear();
    const std::size_t wake_index = set.add(wake_->fd(), POLLIN);
    set.add(stop_.fd(), POLLIN);           // seen through stop_.raised() at the top of the turn
    const std::size_t first = set.size();  // pending_[i] is at first + i
    // The nearest handshake or linger deadline; with none pending, until an event (a
    // connection handed over, or the stop): an idle stage makes no wake-ups.
    auto wake = steady_clock::time_point::max();
    for (const auto& p : pending_) {
      const short crossed = p->t ? p->t->crossed() : short{0};
      set.add(p->fd(), crossed != 0 ? crossed : static_cast<short>(POLLIN));
      wake = std::min(wake, p->deadline);
    }
    if (!set.wait(wake, now)) {
      std::perror("spoold: poll (TLS handshakes)");
      break;
    }
    now = steady_clock::now();
    if (set.revents(wake_index) != 0) wake_->drain();
    // pending_ may only shrink here; entries past the polled ones were not polled.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      pending& p = *pending_[i];
      const short revents = set.revents(first + i);
      bool stays = true;
      if (revents != 0) stays = progress(p, revents, now);
      if (stays && now >= p.deadline) {
        if (!p.lingering) {
          ctx_.counters.tls_handshake_failed(static_cast<std::size_t>(tls_failure::timeout));
        }
        drop(p);
        stays = false;
      }
      if (stays) pending_[kept++] = std::move(pending_[i]);
    }
    pending_.resize(kept);
  }
  // The stop: handshakes still pending are closed, uncounted (the server is going away).
  for (auto& p : pending_) drop(*p);
  pending_.clear();
  std::vector<accepted> late;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    late.swap(incoming_);
  }
  for (accepted& a : late) discard(a);
}

}  // namespace spoold
