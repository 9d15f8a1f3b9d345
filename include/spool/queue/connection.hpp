// spool/queue/connection.hpp: how the queue's objects reach Redis.
//
// Every object takes a store URL, the same forms spoold's --store takes:
//   redis://HOST[:PORT]                                 (port 6379 by default)
//   redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER (port 26379 by default)
// With Sentinels, each connection goes to the primary the Sentinels name and is checked with
// ROLE; a connection that finds a replica (READONLY), or hears of a failover, moves to the new
// primary. Either way an instance that answers ROLE as a replica is refused (errc::unavailable
// "... is a read-only replica"). The first connection loads the queue's Redis functions.
#pragma once

#include <chrono>

namespace spool::queue {

struct connection_options {
  // Bounds on each connect and each command's round trip: a Redis that is down or cut off
  // costs a call at most this long, never a hang.
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{2000};
  // Redis holds one build's queue functions at a time (docs/queue.md, "Upgrading"). A
  // connection that finds another build's refuses them (errc::other_version) unless this is
  // set; then it replaces them, and the processes of the other build call functions that are
  // not theirs: set it only once every process of that build has stopped.
  bool replace_functions = false;
};

}  // namespace spool::queue
