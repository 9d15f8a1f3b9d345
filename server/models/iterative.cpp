// The iterative server: one thread accepts a connection, serves it to its end, and only then
// accepts the next. Every other client waits in the listen backlog meanwhile, so one slow or
// idle keep-alive client holds up everyone (README.md). The baseline of the classic designs.
#include "models/classic_model.hpp"

namespace spoold {
namespace {

class iterative_model : public classic_model {
 public:
  explicit iterative_model(server_context& ctx) : classic_model(ctx, {}) {}

 private:
  void start_threads() override {
    spawn_acceptor("spoold-iter", [this](accepted&& a) { serve(std::move(a)); });
  }
};

}  // namespace

std::unique_ptr<server_model> make_iterative_model(server_context& ctx) {
  return make_stopped_on_destruction<iterative_model>(ctx);
}

}  // namespace spoold
