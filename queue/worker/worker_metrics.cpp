#include "worker_metrics.hpp"

#include <cstdio>

namespace spool::queue::detail {

const std::array<double, worker_metrics::bucket_count>& worker_metrics::bounds() {
  static const std::array<double, bucket_count> b = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  return b;
}

void worker_metrics::handler_ran(std::chrono::nanoseconds took) noexcept {
  const double s = std::chrono::duration<double>(took).count();
  std::size_t i = 0;
  while (i < bucket_count && s > bounds()[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  time_count_.fetch_add(1, std::memory_order_relaxed);
  time_sum_ns_.fetch_add(static_cast<std::uint64_t>(took.count()), std::memory_order_relaxed);
}

worker_counters worker_metrics::snapshot(std::uint64_t in_flight) const {
  const auto get = [](const std::atomic<std::uint64_t>& a) {
    return a.load(std::memory_order_relaxed);
  };
  worker_counters c;
  c.started = get(started);
  c.given = get(given);
  c.done = get(done);
  c.failed = get(failed);
  c.retried = get(retried);
  c.dead = get(dead);
  c.takeovers = get(takeovers);
  c.lost = get(lost);
  c.stale = get(stale);
  c.cancelled = get(cancelled);
  c.handed_back = get(handed_back);
  c.redis_errors = get(redis_errors);
  c.in_flight = in_flight;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    cumulative += get(buckets_[i]);
    c.handler_time_buckets.push_back(cumulative);
  }
  c.handler_time_count = get(time_count_);
  c.handler_time_sum_s = static_cast<double>(get(time_sum_ns_)) / 1e9;
  return c;
}

std::string worker_metrics::prometheus(const std::string& queue, const std::string& consumer,
                                       std::uint64_t in_flight) const {
  const worker_counters c = snapshot(in_flight);
  const std::string labels = "queue=\"" + queue + "\",worker=\"" + consumer + "\"";
  std::string out;
  const auto counter = [&](const char* name, const char* help, std::uint64_t value) {
    out += std::string("# HELP spool_queue_worker_") + name + " " + help + "\n";
    out += std::string("# TYPE spool_queue_worker_") + name + " counter\n";
    out += std::string("spool_queue_worker_") + name + "{" + labels + "} " + std::to_string(value) +
           "\n";
  };
  counter("started_total", "Attempts started (handler called).", c.started);
  counter("given_total", "Jobs a submission started for this worker while it was idle.", c.given);
  counter("done_total", "Results recorded.", c.done);
  counter("failed_total", "Attempts that failed (an exception or the time limit).", c.failed);
  counter("retried_total", "Failed attempts whose job will run again.", c.retried);
  counter("dead_total", "Failed attempts after which the job is dead.", c.dead);
  counter("lease_takeovers_total", "Jobs taken over from an expired lease.", c.takeovers);
  counter("leases_lost_total", "Attempts whose lease this worker lost.", c.lost);
  counter("stale_outcomes_total", "Outcomes refused: the attempt no longer held the lease.",
          c.stale);
  counter("cancelled_total", "Attempts stopped because their job was cancelled.", c.cancelled);
  counter("handed_back_total", "Jobs handed back on stop.", c.handed_back);
  counter("redis_errors_total", "Round trips to Redis that failed.", c.redis_errors);
  out += "# HELP spool_queue_worker_in_flight Jobs this worker holds now.\n";
  out += "# TYPE spool_queue_worker_in_flight gauge\n";
  out += "spool_queue_worker_in_flight{" + labels + "} " + std::to_string(in_flight) + "\n";
  out += "# HELP spool_queue_worker_handler_seconds Time a handler ran.\n";
  out += "# TYPE spool_queue_worker_handler_seconds histogram\n";
  char le[32];
  for (std::size_t i = 0; i < bucket_count; ++i) {
    std::snprintf(le, sizeof le, "%g", bounds()[i]);
    out += "spool_queue_worker_handler_seconds_bucket{" + labels + ",le=\"" + le + "\"} " +
           std::to_string(c.handler_time_buckets[i]) + "\n";
  }
  out += "spool_queue_worker_handler_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
         std::to_string(c.handler_time_count) + "\n";
  char sum[64];
  std::snprintf(sum, sizeof sum, "%.9f", c.handler_time_sum_s);
  out += "spool_queue_worker_handler_seconds_sum{" + labels + "} " + sum + "\n";
  out += "spool_queue_worker_handler_seconds_count{" + labels + "} " +
         std::to_string(c.handler_time_count) + "\n";
  return out;
}

}  // namespace spool::queue::detail
