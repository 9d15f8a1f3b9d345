// spool/detail/isolation.hpp: the worker-side calls behind spool::isolate (src/worker/loop.cpp).
// Internal: users never name these.
#pragma once

#include "spool/detail/work_item.hpp"

namespace spool::detail {

// Opens a fresh isolation region on the calling worker and returns the one it was in (0 for
// none); off a worker it does nothing and returns 0. isolation_leave restores it.
region_id isolation_enter() noexcept;
void isolation_leave(region_id outer) noexcept;

}  // namespace spool::detail
