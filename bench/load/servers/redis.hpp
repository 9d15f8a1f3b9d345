// redis.hpp: a redis-server for the guestbook benchmarks (http --store redis), started fresh on a
// free loopback port in a temporary directory, without persistence, and stopped with SIGTERM.
#pragma once

#include <memory>
#include <string>

#include "servers/running_server.hpp"

namespace bench {

// Where the experiments expect redis-server (the distribution's package,
// scripts/install-deps.sh).
inline constexpr const char* redis_binary = "/usr/bin/redis-server";

// Starts redis-server on 127.0.0.1 and a free port, with no RDB snapshots and no AOF (what
// ZeroHTTPd's measurements ran against), and waits until it accepts connections. Throws
// std::runtime_error with its log if it does not.
std::unique_ptr<running_server> start_redis();

// The --store spec of spoold for a running server: "redis://127.0.0.1:PORT".
std::string redis_store_spec(const running_server& redis);

}  // namespace bench
