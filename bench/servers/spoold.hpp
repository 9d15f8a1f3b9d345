// spoold.hpp: spoold as a server under test, on a port of the kernel's choosing (--port 0),
// found from its startup line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "servers/running_server.hpp"

namespace bench {

struct spoold_settings {
  std::string binary;
  std::string root;   // --root
  std::string model;  // --model; empty: spoold's default
};

// The port in spoold's startup line, "spoold: listening on http://127.0.0.1:8080/ (...)";
// nullopt if the line is not one.
std::optional<std::uint16_t> listening_port(std::string_view startup_line);

// Starts spoold in a directory of its own (its default SQLite store lands there), reads the
// port from its startup line and waits until it accepts connections. Stopped with SIGTERM.
std::unique_ptr<running_server> start_spoold(const spoold_settings& s);

}  // namespace bench
