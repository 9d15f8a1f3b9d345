// Prethreaded: --workers threads (default 100, as in the ZeroHTTPd article) started up front,
// each looping accept -> serve. With --accept-lock on (the default, the article's design) a
// mutex lets one thread at a time wait in accept(); with off, every idle thread blocks in
// accept() at once and the kernel wakes one of them per connection (accept waits are
// exclusive on Linux, so there is no thundering herd either way). A connection holds its
// thread until it closes: at most `workers` connections are served at once and the rest wait
// in the listen backlog (README.md). Past --max-connections (possible only with more workers
// than that) a thread answers 503 instead of serving.
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "models/model.hpp"
#include "models/session.hpp"
#include "net.hpp"

namespace spoold {
namespace {

constexpr unsigned default_workers = 100;

class prethreaded_model final : public server_model {
 public:
  explicit prethreaded_model(server_context& ctx) : ctx_(ctx) {}
  ~prethreaded_model() override {
    stop();
    wait();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  std::uint16_t start() override {
    listen_fd_ = listen_tcp(ctx_.opts.bind, ctx_.opts.port, /*reuse_port=*/false);
    set_blocking(listen_fd_, true);
    const std::uint16_t port = local_port(listen_fd_);
    const std::size_t count = ctx_.opts.workers != 0 ? ctx_.opts.workers : default_workers;
    flusher_.emplace(ctx_.log);
    threads_.reserve(count);
    try {
      for (std::size_t i = 0; i < count; ++i) threads_.emplace_back([this, i] { run(i); });
    } catch (...) {
      stop();
      wait();
      throw;
    }
    return port;
  }

  void stop() override {
    stop_.raise();
    stop_listening(listen_fd_);
  }

  void wait() override {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
    flusher_.reset();
  }

 private:
  void run(std::size_t index) {
    name_this_thread("spoold-w-" + std::to_string(index));
    while (!stop_.raised()) {
      int fd = -1;
      sockaddr_in peer{};
      accept_outcome got;
      if (ctx_.opts.accept_lock) {
        std::lock_guard lock(accept_mu_);
        got = accept_connection(listen_fd_, stop_, fd, peer);
      } else {
        got = accept_connection(listen_fd_, stop_, fd, peer);
      }
      if (got == accept_outcome::closed) break;
      if (got != accept_outcome::accepted) continue;
      // Only with more threads than --max-connections can a thread be free to refuse.
      if (serving_.fetch_add(1, std::memory_order_relaxed) >= ctx_.opts.max_connections) {
        refuse_connection(ctx_, fd);
      } else {
        serve_connection(ctx_, stop_, fd, peer);
      }
      serving_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  server_context& ctx_;
  stop_signal stop_;
  int listen_fd_ = -1;
  std::optional<log_flusher> flusher_;
  std::mutex accept_mu_;
  std::atomic<std::size_t> serving_{0};  // connections being served (or refused) now
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<server_model> make_prethreaded_model(server_context& ctx) {
  return std::make_unique<prethreaded_model>(ctx);
}

}  // namespace spoold
