#include "models/classic_model.hpp"

#include <chrono>

#include "thread_name.hpp"

namespace spoold {
namespace {

constexpr auto log_flush_interval = std::chrono::milliseconds(100);

}  // namespace

log_flusher::log_flusher(access_log* log) : log_(log) {
  if (log_ == nullptr) return;
  thread_ = std::jthread([this](const std::stop_token& stop) {
    name_this_thread("spoold-logflush");
    // Asleep until a line waits; then the lines of the next log_flush_interval join it.
    while (log_->wait_for_lines(stop)) {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, stop, log_flush_interval, [] { return false; });
      lock.unlock();
      log_->flush();
    }
  });
}

log_flusher::~log_flusher() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
  log_->flush();
}

std::uint16_t classic_model::start() {
  // --tls-only: the one listener speaks TLS (--tls-port is the poll model's own).
  listener_.open(ctx_, ctx_.opts.port, shape_.blocking_accept, false, ctx_.opts.tls_only);
  if (ctx_.opts.tls_only) ctx_.tls_port = listener_.port();
  if (shape_.log_flusher) flusher_.emplace(ctx_.log);
  try {
    if (shape_.trim_memory) {
      spawn("spoold-trim", [this] {
        // Asleep until a connection ends; then a tick per interval while there may be memory
        // to hand back (shared_memory_trim::on_tick).
        for (;;) {
          trim_.wait_for_reason();
          do {
            if (stop_.wait_for(shared_memory_trim::interval)) return;
          } while (trim_.on_tick(ctx_.pool.statistics().threads_live, ctx_.opts.min_threads));
        }
      });
    }
    start_threads();
  } catch (...) {
    stop();
    wait();
    throw;
  }
  return listener_.port();
}

void classic_model::stop() {
  stop_.raise();
  trim_.release();
  if (shape_.blocking_accept) listener_.shut_down();
}

void classic_model::wait() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  join_connections();
  flusher_.reset();
}

void classic_model::spawn(std::string name, std::function<void()> body) {
  threads_.emplace_back([name = std::move(name), body = std::move(body)] {
    name_this_thread(name);
    body();
  });
}

void classic_model::spawn_acceptor(std::string name, std::function<void(accepted&&)> on_accept,
                                   std::mutex* accept_mu) {
  spawn(std::move(name),
        [this, on_accept = std::move(on_accept), accept_mu] { accept_loop(on_accept, accept_mu); });
}

void classic_model::accept_loop(const std::function<void(accepted&&)>& on_accept,
                                std::mutex* accept_mu) {
  while (!stop_.raised()) {
    accepted a;
    accept_outcome got;
    if (accept_mu != nullptr) {
      std::lock_guard lock(*accept_mu);
      got = listener_.accept(a);
    } else {
      got = listener_.accept(a);
    }
    if (got == accept_outcome::accepted) {
      on_accept(std::move(a));
    } else if (got == accept_outcome::exhausted) {
      stop_.wait_for(accept_pause);  // pending connections wait in the backlog meanwhile
    } else if (got == accept_outcome::failed) {
      break;
    }
  }
}

}  // namespace spoold
