// The reporter: records the outcomes of attempts (spool_finish), up to 256 per round trip, on
// a connection of its own, so that a handler's return never waits for Redis and the lease
// keeper's renewals never wait behind a batch of results.
//
// An outcome that could not be sent (Redis down, a failover) is sent again until Redis takes
// it or refuses it as stale: recording is fenced by (attempt, worker), so repeating it is
// safe, and a repeat of one that did land is answered 'dup'. Meanwhile its job stays held and
// its lease renewed. The job leaves the held table once Redis has answered.
//
// Batching under load: each call is a write, and under appendfsync always each event-loop
// turn of Redis that writes costs an fsync, so a call of its own per outcome costs Redis turns
// that one call for several would not. An outcome is recorded at once, unless the last call
// found two or more outcomes waiting (outcomes come faster than calls return) and outcomes
// arrive more than one per half outcome_hold (a moving average of the gaps between them);
// then the reporter holds the first one up to outcome_hold for others to join. A call that
// then records one outcome alone ends the holding. So one client that submits a job and waits
// for its result (no second outcome can come meanwhile) never waits for a hold, nor do jobs
// at a moderate rate that now and then finish together, and a dense stream of jobs gets its
// results at most outcome_hold later, in fewer calls.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "../redis_link.hpp"
#include "outcome_hold.hpp"
#include "worker_core.hpp"

namespace spool::queue::detail {

struct outcome {
  std::shared_ptr<held_job> job;
  bool ok = false;
  std::string data;  // the result, or the error
};

class reporter {
 public:
  explicit reporter(worker_core& core);
  ~reporter();  // finish() if not done
  reporter(const reporter&) = delete;
  reporter& operator=(const reporter&) = delete;

  void start();
  void push(outcome o);
  // Waits until every outcome pushed has been answered by Redis, or until `deadline`; true if
  // none is left.
  bool wait_empty(std::chrono::steady_clock::time_point deadline);
  // Stops the thread (outcomes not yet sent are dropped: their leases will expire).
  void finish();

 private:
  void run();
  // Sends one batch; throws error when Redis could not be reached.
  void record(std::deque<outcome>& batch);

  worker_core& core_;
  redis_link link_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<outcome> queue_;
  std::size_t in_progress_ = 0;
  bool done_ = false;
  // When the last outcome was pushed, and the moving average of the gaps between pushes.
  std::chrono::steady_clock::time_point last_push_{};
  std::chrono::steady_clock::duration gap_ = std::chrono::seconds(1);
  std::thread thread_;
};

}  // namespace spool::queue::detail
