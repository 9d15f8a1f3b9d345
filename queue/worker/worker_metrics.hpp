// A worker's counters and its handler-time histogram: relaxed atomics, bumped by the
// worker's threads and the handlers, read as a snapshot (worker::counters) or as Prometheus
// text (worker::prometheus).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "spool/queue/worker.hpp"

namespace spool::queue::detail {

class worker_metrics {
 public:
  static constexpr std::size_t bucket_count = 17;
  static const std::array<double, bucket_count>& bounds();

  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> given{0};
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> retried{0};
  std::atomic<std::uint64_t> dead{0};
  std::atomic<std::uint64_t> takeovers{0};
  std::atomic<std::uint64_t> lost{0};
  std::atomic<std::uint64_t> stale{0};
  std::atomic<std::uint64_t> cancelled{0};
  std::atomic<std::uint64_t> handed_back{0};
  std::atomic<std::uint64_t> redis_errors{0};

  static void add(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) noexcept {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
  void handler_ran(std::chrono::nanoseconds took) noexcept;

  // in_flight comes from the held-jobs table.
  [[nodiscard]] worker_counters snapshot(std::uint64_t in_flight) const;
  [[nodiscard]] std::string prometheus(const std::string& queue, const std::string& consumer,
                                       std::uint64_t in_flight) const;

 private:
  std::array<std::atomic<std::uint64_t>, bucket_count + 1> buckets_{};  // the last: +Inf
  std::atomic<std::uint64_t> time_count_{0};
  std::atomic<std::uint64_t> time_sum_ns_{0};
};

}  // namespace spool::queue::detail
