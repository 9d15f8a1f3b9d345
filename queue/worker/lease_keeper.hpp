// The lease keeper: a thread of the worker's own (never a pool worker, so a handler that keeps
// every pool thread busy cannot delay it) that every lease / 3 renews the lease of each job
// the worker holds (spool_renew, one round trip for all), and fires the token of a job whose
// time limit has passed, reporting that attempt as failed.
//
// Renewal answers, per job: held; lost (another attempt holds it now: a takeover after this
// worker went silent for longer than the lease, or a failover undid the claim); cancelled.
// A lost or cancelled job's token fires and it leaves the table; whatever its handler returns
// later is dropped. A job whose outcome is being recorded (reporting, expired) is left to the
// reporter: Redis may already have taken its outcome, which is why the renewal found it gone.
#pragma once

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "../redis_link.hpp"
#include "reporter.hpp"
#include "worker_core.hpp"

namespace spool::queue::detail {

class lease_keeper {
 public:
  lease_keeper(worker_core& core, reporter& report);
  ~lease_keeper();  // finish() if not done
  lease_keeper(const lease_keeper&) = delete;
  lease_keeper& operator=(const lease_keeper&) = delete;

  void start();
  void finish();

 private:
  void run();
  // Fires the tokens of jobs past their time limit; returns when the next limit is due.
  std::chrono::steady_clock::time_point enforce_limits(std::chrono::steady_clock::time_point now);
  void renew(const std::vector<std::shared_ptr<held_job>>& jobs);

  worker_core& core_;
  reporter& report_;
  redis_link link_;
  wakeup done_;
  std::thread thread_;
};

}  // namespace spool::queue::detail
