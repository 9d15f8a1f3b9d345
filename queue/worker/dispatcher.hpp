// The dispatcher: the worker's thread that claims jobs and hands them to the pool, and that,
// once asked to stop, drains the worker.
//
// Claiming (spool_claim) starts at most `room` jobs (free threads + prefetch), so the worker
// never holds jobs it cannot run soon. When the streams had fewer, the claim lists the worker
// idle with the room it has left (unless options.direct is false), and it waits until the next
// due delayed job or the next check for a wake-up token (one per job made ready, so that one
// job wakes one idle worker, not all) or, listed, for a job a submission started for it; every
// check_interval a claim also takes over jobs whose lease expired. A listed worker reads its
// inbox stream (XREAD BLOCK from the last entry it has read), where submissions put the jobs
// they start for it and its wake-up tokens; an unlisted one pops a token from :ready (BLPOP).
// A job from the inbox runs with no claim: as its entry describes it when the entry carries
// the job's fields (a payload of at most 4096 bytes: functions.lua, give), else as its hash,
// read with HMGET, says; the worker claims again after a token, a timeout, or the last job its
// listing allowed. With no room it waits for a handler to
// return.
//
// Reading the inbox writes nothing to Redis (under appendfsync always, it costs no fsync), and
// a read whose reply is lost loses nothing: the worker passes the id of the last entry it has
// dispatched to its next claim, which returns the entries after it and deletes the inbox.
//
// A claim whose reply was lost may have started jobs for this worker that it does not know of:
// after the next successful round trip it reconciles (spool_reconcile), handing back what
// Redis says it holds and it does not.
//
// Draining (stop): stop claiming; leave the idle list, handing back what the inbox holds; hand
// back at once the jobs not yet started; wait up to
// drain_timeout for the running handlers; hand back the jobs still running (tokens fire); wait
// for the reporter to record what was finished; reconcile and leave the consumer group.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
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
    bool idle = false;    // nothing more can start now: wait for a token (functions.lua)
    unsigned listed = 0;  // jobs submissions may start for this worker (its inbox)
  };
  enum class woken { stop, timeout, token, given };

  void run();
  void claim_loop();
  claim_answer claim(unsigned room, bool takeovers);
  void dispatch(std::vector<std::shared_ptr<held_job>>& jobs);
  void run_handler(const std::shared_ptr<held_job>& job);
  // A job entry of the inbox: its number and attempt (empty strings for fields it lacks) and,
  // when the entry carries the job's fields, the job it describes.
  struct given_item {
    std::string number;
    std::string attempt;
    std::shared_ptr<held_job> carried;
  };
  // What one wait found in the inbox: the job entries after inbox_read_ up to `last`, and
  // whether a wake-up token was among them.
  struct inbox_entries {
    std::vector<given_item> items;
    std::string last;
    bool token = false;
  };
  // Sleeps until a wake-up token comes or, when `listed`, the inbox has new entries (they go
  // to `found`), or `wait` passes, or a stop is asked for.
  woken wait_for_work(std::chrono::milliseconds wait, bool listed, inbox_entries& found);
  // The jobs of the inbox items, in their order: a carried job as it is, the others read from
  // their hashes in one round trip (none when every item is carried). A job read from its
  // hash that no longer holds the item's attempt for this worker (cancelled or taken over
  // since) is left out; a carried one was deleted from the inbox by whatever took its attempt
  // away before the read, and is run.
  std::vector<std::shared_ptr<held_job>> take_given(std::vector<given_item>& items);
  // The job an inbox entry's fields describe, or null when they are not a whole job
  // (`number` and `attempt` are its first two fields).
  std::shared_ptr<held_job> carried_job(const std::string& number, const std::string& attempt,
                                        const redisReply& fields) const;
  // The most inbox entries read at once (a worker is never given more than its room, but
  // tokens come too).
  static constexpr unsigned max_taken = 10000;
  void reconcile(bool leaving);
  // Hands back the jobs (spool_release), retrying until `deadline`.
  void hand_back(const std::vector<std::shared_ptr<held_job>>& jobs,
                 std::chrono::steady_clock::time_point deadline);
  void drain();

  worker_core& core_;
  reporter& report_;
  spool::pool& pool_;
  redis_link link_;
  const std::string job_prefix_;  // "spool:{QUEUE}:job:"
  const std::string inbox_key_;   // this worker's inbox
  const std::string ready_key_;   // the wake-up tokens
  bool reconcile_needed_ = true;  // a worker that restarted under the same name
  // The id of the last inbox entry dispatched; "0-0" after a claim or a reconcile, which
  // delete the inbox.
  std::string inbox_read_ = "0-0";
  std::function<void()> on_stopped_;
  std::thread thread_;
};

}  // namespace spool::queue::detail
