// The dispatcher: the worker's thread that claims jobs and hands them to the pool, and that,
// once asked to stop, drains the worker.
//
// Claiming (spool_claim) starts at most `room` jobs (free threads + prefetch), so the worker
// never holds jobs it cannot run soon. When the streams had fewer, it waits (BLPOP) for a
// wake-up token in :ready, which every job made ready pushes one of (so one job wakes one idle
// worker, not all), for the next due delayed job, or for the next check; every check_interval
// a claim also takes over jobs whose lease expired. With no room it waits for a handler to
// return.
//
// A claim whose reply was lost may have started jobs for this worker that it does not know of:
// after the next successful round trip it reconciles (spool_reconcile), handing back what
// Redis says it holds and it does not.
//
// Draining (stop): stop claiming; hand back at once the jobs not yet started; wait up to
// drain_timeout for the running handlers; hand back the jobs still running (tokens fire); wait
// for the reporter to record what was finished; reconcile and leave the consumer group.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../redis_link.hpp"
#include "reporter.hpp"
#include "worker_core.hpp"

namespace spool::queue::detail {

class dispatcher {
 public:
  dispatcher(worker_core& core, reporter& report, spool::pool& pool);
  ~dispatcher();
  dispatcher(const dispatcher&) = delete;
  dispatcher& operator=(const dispatcher&) = delete;

  // Starts the thread; on_stopped() runs on it once the drain is over.
  void start(std::function<void()> on_stopped);
  void join();

 private:
  struct claim_answer {
    std::vector<std::shared_ptr<held_job>> jobs;
    std::int64_t next_due_ms = -1;  // -1: no delayed job
    bool paused = false;
    bool idle = false;  // nothing more can start now: wait for a token (functions.lua)
  };

  void run();
  void claim_loop();
  claim_answer claim(unsigned room, bool takeovers);
  void dispatch(std::vector<std::shared_ptr<held_job>>& jobs);
  void run_handler(const std::shared_ptr<held_job>& job);
  // Sleeps until a wake-up token comes (and takes it), or `wait` passes; false if asked to stop.
  bool wait_for_ready(std::chrono::milliseconds wait);
  void reconcile(bool leaving);
  // Hands back the jobs (spool_release), retrying until `deadline`.
  void hand_back(const std::vector<std::shared_ptr<held_job>>& jobs,
                 std::chrono::steady_clock::time_point deadline);
  void drain();

  worker_core& core_;
  reporter& report_;
  spool::pool& pool_;
  redis_link link_;
  bool reconcile_needed_ = true;  // a worker that restarted under the same name
  std::function<void()> on_stopped_;
  std::thread thread_;
};

}  // namespace spool::queue::detail
