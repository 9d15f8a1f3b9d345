#include <stdexcept>
#include <string>

#include "models/model.hpp"

namespace spoold {
namespace {

struct model_entry {
  std::string_view name;
  std::unique_ptr<server_model> (*make)(server_context&);
};

// In the order of the ZeroHTTPd article's table, the default (options.hpp) first; --help and
// bench/load/servers/spoold.hpp list them so too.
constexpr model_entry models[] = {
    {"epoll", make_epoll_model},       {"iterative", make_iterative_model},
    {"forking", make_forking_model},   {"preforked", make_preforked_model},
    {"threaded", make_threaded_model}, {"prethreaded", make_prethreaded_model},
    {"queue", make_queue_model},       {"poll", make_poll_model},
};

}  // namespace

std::unique_ptr<server_model> make_model(std::string_view name, server_context& ctx) {
  std::string known;
  for (const model_entry& m : models) {
    if (m.name == name) return m.make(ctx);
    known += known.empty() ? "" : ", ";
    known += m.name;
  }
  throw std::invalid_argument("unknown --model '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace spoold
