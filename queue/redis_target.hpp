// Where the queue's Redis primary is: a fixed address (redis://) or whatever the Sentinels say
// (redis-sentinel://, through spoold's Sentinel client, server/store/sentinel.hpp), and a count
// of the failovers heard of, so that connections made before one move to the new primary.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "store/sentinel.hpp"
#include "store/store.hpp"

namespace spool::queue::detail {

using spoold::store::redis_endpoint;

class redis_target {
 public:
  // Parses a store URL (error(errc::invalid_argument) if malformed, or not a Redis one). With
  // Sentinels, starts a thread that listens for +switch-master; `sentinel_timeout` bounds
  // each round trip to a Sentinel.
  redis_target(std::string_view url, std::chrono::milliseconds sentinel_timeout);
  ~redis_target();
  redis_target(const redis_target&) = delete;
  redis_target& operator=(const redis_target&) = delete;

  // The primary's address now. With Sentinels, error(errc::unavailable) when none names one.
  [[nodiscard]] redis_endpoint primary() const;
  // Failovers heard of so far (+switch-master); a connection made before the last one is
  // dropped before its next use.
  [[nodiscard]] std::uint64_t moves() const noexcept {
    return moves_.load(std::memory_order_acquire);
  }
  [[nodiscard]] bool via_sentinels() const noexcept { return sentinel_ != nullptr; }
  // The URL as given, for messages.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
  redis_endpoint fixed_;
  std::atomic<std::uint64_t> moves_{0};
  std::unique_ptr<spoold::store::sentinel_client> sentinel_;
};

}  // namespace spool::queue::detail
