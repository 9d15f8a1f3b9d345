// spool/placement.hpp: where a pool's workers may run (config::affinity).
#pragma once

#include <vector>

namespace spool {

// The CPUs this process may run on (sched_getaffinity), in increasing order: a ready
// config::affinity that pins one worker to each.
std::vector<unsigned> allowed_cpus();
// Whether libspool was built with hwloc, so that pinned workers steal from near victims first.
bool topology_aware() noexcept;

}  // namespace spool
