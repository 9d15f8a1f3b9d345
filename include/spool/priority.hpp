// spool/priority.hpp: the priority of a submission (spool/pool.hpp says how each level runs).
#pragma once

namespace spool {

// Priority of a submission. Higher levels run first, FIFO within a level (see config::aging).
// normal takes the fast paths (own deque, producer slot); low and high go through a shared
// priority queue that every worker looks at, high before its own deque, low after all else.
enum class priority : unsigned char { low = 0, normal = 1, high = 2 };

}  // namespace spool
