// The iterative server: one thread accepts a connection, serves it to its end, and only then
// accepts the next. Every other client waits in the listen backlog meanwhile, so one slow or
// idle keep-alive client holds up everyone (README.md). The baseline of the classic designs.
#include <thread>

#include "models/blocking_model.hpp"
#include "models/model.hpp"
#include "models/session.hpp"

namespace spoold {
namespace {

class iterative_model final : public blocking_model {
 public:
  explicit iterative_model(server_context& ctx) : blocking_model(ctx) {}
  ~iterative_model() override {
    stop();
    wait();
  }

  std::uint16_t start() override {
    const std::uint16_t port = listen();
    start_log_flusher();
    thread_ = std::thread([this] {
      name_this_thread("spoold-iter");
      accept_loop(
          [this](int fd, const sockaddr_in& peer) { serve_connection(ctx_, stop_, fd, peer); });
    });
    return port;
  }

 private:
  void join_threads() override {
    if (thread_.joinable()) thread_.join();
  }

  std::thread thread_;
};

}  // namespace

std::unique_ptr<server_model> make_iterative_model(server_context& ctx) {
  return std::make_unique<iterative_model>(ctx);
}

}  // namespace spoold
