// peer_names.hpp: the peers' names, for option checking without the peers' heavy headers.
// all_peers.hpp asserts that this list matches the adapters, in the same order.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace bench {

inline constexpr std::array<std::string_view, 6> peer_names{
    "spool", "tbb_task_group", "tbb_arena", "asio", "omp", "mutex_pool"};

inline bool is_peer_name(std::string_view name) {
  for (std::string_view p : peer_names)
    if (p == name) return true;
  return false;
}

inline std::string peer_list() {
  std::string out;
  for (std::string_view p : peer_names) out += (out.empty() ? "" : ",") + std::string(p);
  return out;
}

}  // namespace bench
