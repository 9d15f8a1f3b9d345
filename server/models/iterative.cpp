// The iterative server: one thread accepts a connection, serves it to its end, and only then
// accepts the next. Every other client waits in the listen backlog meanwhile, so one slow or
// idle keep-alive client holds up everyone (README.md). The baseline of the classic designs.
#include <unistd.h>

#include <thread>

#include "models/model.hpp"
#include "models/session.hpp"
#include "net.hpp"

namespace spoold {
namespace {

class iterative_model final : public server_model {
 public:
  explicit iterative_model(server_context& ctx) : ctx_(ctx) {}
  ~iterative_model() override {
    stop();
    wait();
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  std::uint16_t start() override {
    listen_fd_ = listen_tcp(ctx_.opts.bind, ctx_.opts.port, /*reuse_port=*/false);
    set_blocking(listen_fd_, true);
    const std::uint16_t port = local_port(listen_fd_);
    flusher_.emplace(ctx_.log);
    thread_ = std::thread([this] { run(); });
    return port;
  }

  void stop() override {
    stop_.raise();
    stop_listening(listen_fd_);
  }

  void wait() override {
    if (thread_.joinable()) thread_.join();
    flusher_.reset();
  }

 private:
  void run() {
    name_this_thread("spoold-iter");
    while (!stop_.raised()) {
      int fd = -1;
      sockaddr_in peer{};
      const accept_outcome got = accept_connection(listen_fd_, stop_, fd, peer);
      if (got == accept_outcome::closed) break;
      if (got == accept_outcome::accepted) serve_connection(ctx_, stop_, fd, peer);
    }
  }

  server_context& ctx_;
  stop_signal stop_;
  int listen_fd_ = -1;
  std::optional<log_flusher> flusher_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<server_model> make_iterative_model(server_context& ctx) {
  return std::make_unique<iterative_model>(ctx);
}

}  // namespace spoold
