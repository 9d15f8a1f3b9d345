// placement/topology.cpp: reading the machine's topology with hwloc (when built with it), and
// the worker places derived from config::affinity (see topology.hpp).
#include "placement/topology.hpp"

#include "spool/spool.hpp"

#ifdef SPOOL_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace spool {

bool topology_aware() noexcept {
#ifdef SPOOL_HAVE_HWLOC
  return true;
#else
  return false;
#endif
}

namespace detail {

std::vector<place> read_topology() {
  std::vector<place> cpus;
#ifdef SPOOL_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return cpus;
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return cpus;
  }
  const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, static_cast<unsigned>(i));
    if (pu == nullptr) continue;
    place p;
    if (hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu)) {
      p.core = static_cast<int>(core->logical_index);
    }
    // The last-level cache: L3 where there is one, else the highest cache above the PU.
    if (hwloc_obj_t l3 = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_L3CACHE, pu)) {
      p.cache = static_cast<int>(l3->logical_index);
    }
    if (pu->nodeset != nullptr) p.node = hwloc_bitmap_first(pu->nodeset);
    if (cpus.size() <= pu->os_index) cpus.resize(pu->os_index + 1);
    cpus[pu->os_index] = p;
  }
  hwloc_topology_destroy(topo);
#endif
  return cpus;
}

std::vector<place> worker_places(std::span<const unsigned> cpus, std::span<const place> topo,
                                 std::size_t capacity) {
  std::vector<place> places;
  if (cpus.empty() || topo.empty()) return places;
  places.resize(capacity);
  for (std::size_t i = 0; i < capacity; ++i) {
    const unsigned cpu = cpus[i % cpus.size()];
    if (cpu < topo.size()) places[i] = topo[cpu];
  }
  return places;
}

std::vector<std::size_t> victim_order(std::size_t self, std::size_t n,
                                      std::span<const place> places, std::size_t start) {
  std::vector<std::size_t> order;
  order.reserve(n);
  for_each_victim(self, n, places, start, [&order](std::size_t v) {
    order.push_back(v);
    return false;
  });
  return order;
}

}  // namespace detail
}  // namespace spool
