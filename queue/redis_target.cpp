#include "redis_target.hpp"

#include <stdexcept>

#include "spool/queue/error.hpp"

namespace spool::queue::detail {

redis_target::redis_target(std::string_view url, std::chrono::milliseconds sentinel_timeout)
    : name_(url) {
  if (!spoold::store::is_redis_spec(url)) {
    throw error(errc::invalid_argument,
                "store URL \"" + std::string(url) +
                    "\": the queue lives in Redis (expected redis://HOST[:PORT] or "
                    "redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER)");
  }
  spoold::store::redis_options options;
  try {
    options = spoold::store::parse_redis_spec(url);
  } catch (const std::invalid_argument& e) {
    throw error(errc::invalid_argument, e.what());
  }
  fixed_ = redis_endpoint{options.host, options.port};
  if (options.sentinels.empty()) return;
  sentinel_ = std::make_unique<spoold::store::sentinel_client>(
      options.sentinels, options.master_name, sentinel_timeout);
  sentinel_->watch(
      [this](const redis_endpoint&) { moves_.fetch_add(1, std::memory_order_acq_rel); });
}

redis_target::~redis_target() = default;

redis_endpoint redis_target::primary() const {
  if (!sentinel_) return fixed_;
  try {
    return sentinel_->primary();
  } catch (const spoold::store::no_primary& e) {
    throw error(errc::unavailable, e.what());
  }
}

}  // namespace spool::queue::detail
