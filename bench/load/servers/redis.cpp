#include "servers/redis.hpp"

#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "servers/temp_dir.hpp"

namespace bench {

std::unique_ptr<running_server> start_redis() {
  auto dir = std::make_unique<temp_dir>("spool-load-bench-redis");
  const std::string log = dir->file("redis.log");
  // A port that was free a moment ago: redis-server cannot report one it picked itself.
  const std::uint16_t port = free_port();
  const std::vector<std::string> argv{
      redis_binary, "--bind", "127.0.0.1",    "--port",    std::to_string(port),
      "--save",     "",       "--appendonly", "no",        "--daemonize",
      "no",         "--dir",  dir->path(),    "--logfile", log};
  auto process =
      std::make_unique<child_process>(child_process::launch{argv, dir->path(), false, false, log});
  wait_until_listening(*process, port, "redis-server", log, std::chrono::seconds(10));
  return std::make_unique<running_server>(
      "redis-server", std::move(dir), std::move(process), log, port,
      running_server::stop_rule{SIGTERM, std::chrono::seconds(20)});
}

std::string redis_store_spec(const running_server& redis) {
  return "redis://127.0.0.1:" + std::to_string(redis.port());
}

}  // namespace bench
