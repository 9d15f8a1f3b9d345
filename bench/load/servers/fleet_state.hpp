// fleet_state.hpp: what `cluster/fleet.py up --dir DIR` started, read from DIR/state.json, the
// fleet's own record of its layout (cluster/README.md), not from what `up` prints.
#pragma once

#include <string>
#include <vector>

namespace bench {

struct fleet_endpoint {
  std::string name;
  std::string addr;
  unsigned port = 0;

  std::string text() const { return addr + ":" + std::to_string(port); }
};

struct fleet_state {
  fleet_endpoint haproxy;
  std::vector<fleet_endpoint> nodes;  // web1, web2, ...
};

// Reads `path` (a state.json); throws std::runtime_error naming the file and what is missing
// or malformed in it.
fleet_state read_fleet_state(const std::string& path);

}  // namespace bench
