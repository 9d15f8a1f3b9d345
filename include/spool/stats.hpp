// spool/stats.hpp: a snapshot of a pool's counters (pool::statistics).
#pragma once

#include <cstdint>

namespace spool {

// A snapshot of the pool's counters. Each field is read atomically, but the fields are not
// read at one instant, so under load they need not add up exactly.
struct stats {
  std::uint64_t threads_live = 0;        // worker threads that exist
  std::uint64_t threads_busy = 0;        // workers running a task now
  std::uint64_t queued = 0;              // tasks waiting in the queue and the deques
  std::uint64_t submitted = 0;           // tasks accepted
  std::uint64_t completed = 0;           // tasks that ran and returned normally
  std::uint64_t failed = 0;              // tasks that ran and threw
  std::uint64_t rejected = 0;            // submissions refused (full, timed out, shut down)
  std::uint64_t stolen = 0;              // tasks a worker took from another worker's deque
  std::uint64_t cancelled = 0;           // tasks dropped without running
  std::uint64_t threads_blocked = 0;     // workers inside a blocking_region now
  std::uint64_t threads_started = 0;     // threads started, the initial ones included
  std::uint64_t threads_retired = 0;     // threads that retired idle (shutdown not counted)
  std::uint64_t grown_for_load = 0;      // of threads_started: started by the monitor
  std::uint64_t grown_for_blocking = 0;  // of threads_started: compensating a blocking_region
};

}  // namespace spool
