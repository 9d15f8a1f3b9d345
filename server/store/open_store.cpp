// open_store: the --store spec ("sqlite:PATH", "redis://HOST[:PORT]",
// "redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER") to a store. The Redis forms are
// parsed in redis_spec.cpp.
#include <stdexcept>
#include <string>
#include <string_view>

#include "store/store.hpp"

namespace spoold::store {
namespace {

constexpr std::string_view sqlite_prefix = "sqlite:";

}  // namespace

std::unique_ptr<store> open_store(std::string_view spec, const store_options& options) {
  if (spec.starts_with(sqlite_prefix)) {
    const std::string_view path = spec.substr(sqlite_prefix.size());
    if (path.empty()) malformed_store_spec(spec, "no file name after sqlite:");
    // Each thread has its own connection, and every connection to ":memory:" is a separate
    // database: the guestbook would differ from one request to the next.
    if (path == ":memory:")
      malformed_store_spec(spec, "an in-memory SQLite database cannot be shared");
    if (options.replicas > 0) {
      throw std::invalid_argument("store spec \"" + std::string(spec) +
                                  "\": replicas can only be asked of a Redis store");
    }
    return open_sqlite_store(std::string(path), options.connections);
  }
  redis_options redis = parse_redis_spec(spec);
  redis.replicas = options.replicas;
  redis.replica_timeout = options.replica_timeout;
  redis.connections = options.connections;
  return open_redis_store(redis);
}

}  // namespace spoold::store
