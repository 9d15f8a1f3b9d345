// spool/shutdown.hpp: how a pool shuts down (pool::shutdown, shutdown_until, shutdown_for).
#pragma once

#include <cstddef>

namespace spool {

enum class shutdown_mode {
  drain,    // refuse new work, run everything already queued, join the threads
  discard,  // refuse new work, drop everything queued (futures report cancellation), join
};

// What shutdown_until() and shutdown_for() did.
struct shutdown_report {
  // Tasks dropped without running: queued when the deadline passed, and pending timers.
  std::size_t dropped = 0;
  // Of those, timers: one-shot timers not due by the deadline, and periodic ones.
  std::size_t timers_dropped = 0;
  // The deadline passed with tasks still queued or running: the queued ones were dropped,
  // the running ones finished (a task is never interrupted; one that takes a std::stop_token
  // sees the pool's stop requested).
  bool timed_out = false;
};

}  // namespace spool
