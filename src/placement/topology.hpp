// placement/topology.hpp: where a pinned worker's CPU sits (its core, last-level cache, NUMA
// node), and the order in which a worker tries its victims when it steals: nearest first.
//
// State: none of its own. queues/ keeps one `place` per worker slot (queues::places_), filled
// at construction from config::affinity and read_topology(); the search walks victims with
// for_each_victim.
//
// Invariants:
//  - A worker's place is fixed for the pool's life: worker i always runs on
//    affinity[i % affinity.size()] (elastic/sizer.cpp pins it before its first task).
//  - for_each_victim visits every other index in [0, n) exactly once, in non-decreasing
//    distance(self, victim); among victims at one distance, in index order rotated to start at
//    `start` (a random start, so that thieves spread over the near victims as they do over all
//    victims when unpinned).
//  - Without hwloc read_topology() is empty and the pool keeps no places: stealing is the
//    unpinned search, every victim equally near. That is the defined fallback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spool::detail {

// A CPU's position. An id of -1 is unknown and matches nothing (not even another -1).
struct place {
  int core = -1;   // the physical core (its hardware threads share it)
  int cache = -1;  // the last-level (L3) cache, or the core complex that owns one
  int node = -1;   // the NUMA node
};

// 0: the same core, 1: the same last-level cache, 2: the same NUMA node, 3: farther.
inline unsigned distance(const place& a, const place& b) noexcept {
  if (a.core >= 0 && a.core == b.core) return 0;
  if (a.cache >= 0 && a.cache == b.cache) return 1;
  if (a.node >= 0 && a.node == b.node) return 2;
  return 3;
}
inline constexpr unsigned k_distances = 4;

// One entry per CPU id, index = OS CPU id (entries for CPUs hwloc did not report stay
// unknown). Empty without hwloc or if hwloc fails.
std::vector<place> read_topology();

// The places of worker slots [0, capacity): worker i on cpus[i % cpus.size()]. Empty if cpus
// or topo is.
std::vector<place> worker_places(std::span<const unsigned> cpus, std::span<const place> topo,
                                 std::size_t capacity);

// Calls visit(v) for each victim v != self in [0, n), nearest first (see the invariants);
// stops early, returning true, when visit returns true. places has at least n entries.
template <class Visit>
bool for_each_victim(std::size_t self, std::size_t n, std::span<const place> places,
                     std::size_t start, Visit visit) {
  const place& me = places[self];
  for (unsigned d = 0; d < k_distances; ++d) {
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t v = (start + k) % n;
      if (v == self || distance(me, places[v]) != d) continue;
      if (visit(v)) return true;
    }
  }
  return false;
}

// for_each_victim's order as a list (tests, diagnostics).
std::vector<std::size_t> victim_order(std::size_t self, std::size_t n,
                                      std::span<const place> places, std::size_t start);

}  // namespace spool::detail
