// Prethreaded: --workers threads (default 100, as in the ZeroHTTPd article) started up front,
// each looping accept -> serve. With --accept-lock on (the default, the article's design) a
// mutex lets one thread at a time wait in accept(); with off, every idle thread blocks in
// accept() at once and the kernel wakes one of them per connection (accept waits are
// exclusive on Linux, so there is no thundering herd either way). A connection holds its
// thread until it closes: at most `workers` connections are served at once and the rest wait
// in the listen backlog (README.md). Past --max-connections (possible only with more workers
// than that) a thread answers 503 instead of serving.
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "models/blocking_model.hpp"
#include "models/model.hpp"
#include "models/session.hpp"

namespace spoold {
namespace {

constexpr unsigned default_workers = 100;

class prethreaded_model final : public blocking_model {
 public:
  explicit prethreaded_model(server_context& ctx) : blocking_model(ctx) {}
  ~prethreaded_model() override {
    stop();
    wait();
  }

  std::uint16_t start() override {
    const std::uint16_t port = listen();
    const std::size_t count = ctx_.opts.workers != 0 ? ctx_.opts.workers : default_workers;
    start_log_flusher();
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

 private:
  void join_threads() override {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  void run(std::size_t index) {
    name_this_thread("spoold-w-" + std::to_string(index));
    std::mutex* lock = ctx_.opts.accept_lock ? &accept_mu_ : nullptr;
    accept_loop([this](int fd, const sockaddr_in& peer) { serve_or_refuse(fd, peer); }, lock);
  }

  void serve_or_refuse(int fd, const sockaddr_in& peer) {
    // Only with more threads than --max-connections can a thread be free to refuse.
    if (serving_.fetch_add(1, std::memory_order_relaxed) >= ctx_.opts.max_connections) {
      refuse_connection(ctx_, fd);
    } else {
      serve_connection(ctx_, stop_, fd, peer);
    }
    serving_.fetch_sub(1, std::memory_order_relaxed);
  }

  std::mutex accept_mu_;
  std::atomic<std::size_t> serving_{0};  // connections being served (or refused) now
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<server_model> make_prethreaded_model(server_context& ctx) {
  return std::make_unique<prethreaded_model>(ctx);
}

}  // namespace spoold
