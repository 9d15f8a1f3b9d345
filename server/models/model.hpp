// A server architecture: how connections are accepted and who runs a request. Every model
// serves the same app (routes, limits, answers) through the same HTTP code; they differ only in
// how they use threads, processes and readiness notification (server/models/README.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "server_context.hpp"

namespace spoold {

class server_model {
 public:
  virtual ~server_model() = default;
  // Binds and starts serving; returns the port (useful with --port 0). Throws on failure.
  virtual std::uint16_t start() = 0;
  // Stop accepting; in-flight requests may finish until the grace period ends. Returns at once.
  virtual void stop() = 0;
  // Blocks until every connection is closed (or the grace period forced them closed) and the
  // model's threads are joined. Blocking jobs already handed to the pool may still be running:
  // the caller drains the pool before destroying the model.
  virtual void wait() = 0;
};

// Owns a model so that its threads are stopped and joined before any member of it is destroyed.
// A model's own destructor could not do it from a base class: by the time a base destructor
// runs, the members of the class derived from it, which its threads use, are gone.
template <class Model>
class stopped_on_destruction final : public Model {
 public:
  using Model::Model;
  ~stopped_on_destruction() override {
    this->stop();
    this->wait();
  }
};

template <class Model>
std::unique_ptr<server_model> make_stopped_on_destruction(server_context& ctx) {
  return std::make_unique<stopped_on_destruction<Model>>(ctx);
}

// Throws std::invalid_argument for an unknown name (the message lists the known ones).
std::unique_ptr<server_model> make_model(std::string_view name, server_context& ctx);

std::unique_ptr<server_model> make_epoll_model(server_context& ctx);
// The classic architectures (README.md has one section each).
std::unique_ptr<server_model> make_poll_model(server_context& ctx);
std::unique_ptr<server_model> make_iterative_model(server_context& ctx);
std::unique_ptr<server_model> make_forking_model(server_context& ctx);
std::unique_ptr<server_model> make_preforked_model(server_context& ctx);
std::unique_ptr<server_model> make_threaded_model(server_context& ctx);
std::unique_ptr<server_model> make_prethreaded_model(server_context& ctx);
std::unique_ptr<server_model> make_queue_model(server_context& ctx);

}  // namespace spoold
