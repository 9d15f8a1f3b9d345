// spoold.hpp: spoold as a server under test, on a port of the kernel's choosing (--port 0),
// found from its startup line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "servers/running_server.hpp"

namespace bench {

struct spoold_settings {
  std::string binary;
  std::string root;                          // --root
  std::string model;                         // --model; empty: spoold's default
  std::vector<std::string> extra_args = {};  // after the rest ("--accept-lock", "off")
};

// The architectures spoold offers (--model), in the order of the ZeroHTTPd article's table
// with the default first. Mirrors server/models/registry.cpp: `--models all` means these.
inline const std::vector<std::string>& spoold_model_names() {
  static const std::vector<std::string> names{"epoll",    "iterative",   "forking", "preforked",
                                              "threaded", "prethreaded", "queue",   "poll"};
  return names;
}

// One spoold configuration a benchmark names: a model, or a model with options
// ("prethreaded-nolock": --model prethreaded --accept-lock off).
struct spoold_variant {
  std::string name;   // as given: "queue", "prethreaded-nolock"
  std::string model;  // the --model value
  std::vector<std::string> extra_args;
  std::string needs_option;  // an option spoold's --help must list ("--accept-lock"), or ""
};
// The variant a --models entry names (any other name is taken as a --model value as it is).
spoold_variant spoold_variant_of(const std::string& name);
// Expands "all" into spoold_model_names(), keeping order and dropping repeats.
std::vector<std::string> expand_spoold_models(const std::vector<std::string>& names);

// `spoold --help` of `binary`; throws std::runtime_error if it cannot be run.
std::string spoold_help(const std::string& binary);

// The port in spoold's startup line, "spoold: listening on http://127.0.0.1:8080/ (...)";
// nullopt if the line is not one.
std::optional<std::uint16_t> listening_port(std::string_view startup_line);

// Starts spoold in a directory of its own (its default SQLite store lands there), reads the
// port from its startup line and waits until it accepts connections. Stopped with SIGTERM.
std::unique_ptr<running_server> start_spoold(const spoold_settings& s);

// spoold as one server of a comparison: "spoold" for its default model (variant ""), else
// "spoold (VARIANT)" with the variant's --model and options. `extra_args` go after them
// (--max-connections).
server_kind spoold_kind(const std::string& binary, const std::string& root,
                        const std::string& variant, const std::vector<std::string>& extra_args);
// The variant in a row name: "spoold (queue)" gives "queue", anything else itself ("nginx",
// "spoold").
std::string short_server_name(const std::string& row_name);

}  // namespace bench
