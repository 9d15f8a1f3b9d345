// Prethreaded: --workers threads (default 100, as in the ZeroHTTPd article) started up front,
// each looping accept -> serve. With --accept-lock on (the default, the article's design) a
// mutex lets one thread at a time wait in accept(); with off, every idle thread blocks in
// accept() at once and the kernel wakes one of them per connection (accept waits are
// exclusive on Linux, so there is no thundering herd either way). A connection holds its
// thread until it closes: at most `workers` connections are served at once and the rest wait
// in the listen backlog (README.md). Past --max-connections (possible only with more workers
// than that) a thread answers 503 instead of serving. While every thread holds a connection and
// a client waits, a thread whose connection only waits on its client gives it up
// (worker_pressure.hpp), so that slow clients cannot hold every thread.
#include <optional>
#include <string>

#include "limits/worker_pressure.hpp"
#include "models/classic_model.hpp"

namespace spoold {
namespace {

constexpr unsigned default_workers = 100;

class prethreaded_model : public classic_model {
 public:
  explicit prethreaded_model(server_context& ctx)
      : classic_model(ctx, {.trim_memory = true}), budget_(ctx.opts.max_connections) {}

 private:
  void start_threads() override {
    const std::size_t count = ctx_.opts.workers != 0 ? ctx_.opts.workers : default_workers;
    pressure_.emplace([this] { return budget_.admitted(); }, count, listener_.fd());
    std::mutex* lock = ctx_.opts.accept_lock ? &accept_mu_ : nullptr;
    for (std::size_t i = 0; i < count; ++i) {
      spawn_acceptor(
          "spoold-w-" + std::to_string(i), [this](accepted&& a) { serve_or_refuse(std::move(a)); },
          lock);
    }
  }

  void serve_or_refuse(accepted&& a) {
    // Only with more threads than --max-connections can a thread be free to refuse.
    if (!budget_.admit()) {
      refuse_connection(ctx_, std::move(a));
      return;
    }
    serve(std::move(a), {.pressure = &*pressure_});
    budget_.release();
  }

  std::mutex accept_mu_;
  connection_budget budget_;  // connections being served now: the busy threads
  std::optional<worker_pressure> pressure_;
};

}  // namespace

std::unique_ptr<server_model> make_prethreaded_model(server_context& ctx) {
  return make_stopped_on_destruction<prethreaded_model>(ctx);
}

}  // namespace spoold
