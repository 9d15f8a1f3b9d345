// spool/queue/admin.hpp: looking at and steering queues and jobs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "spool/queue/connection.hpp"
#include "spool/queue/error.hpp"
#include "spool/queue/job.hpp"

namespace spool::queue {

struct job_status {
  std::string id;
  std::string queue;
  std::string task;
  std::string key;
  job_state state = job_state::queued;
  spool::priority priority = spool::priority::normal;
  std::uint64_t attempt = 0;          // the last attempt's number (0: never started)
  std::uint64_t attempts = 0;         // failures allowed (job_options::attempts)
  std::uint64_t failures = 0;         // attempts that failed
  std::uint64_t takeovers = 0;        // leases lost
  std::uint64_t outcomes = 0;         // outcomes recorded (1 once final)
  std::uint64_t outcome_attempt = 0;  // the attempt whose outcome was recorded (0: none)
  std::string owner;                  // the worker holding it while running
  std::string result;                 // once done
  std::string error;                  // the last failure (once dead: why)
  std::size_t payload_size = 0;
  std::int64_t created_ms = 0;  // Redis's clock, ms since the epoch; 0 = not set
  std::int64_t due_ms = 0;
  std::int64_t started_ms = 0;
  std::int64_t finished_ms = 0;
};

struct worker_info {
  std::string name;           // the consumer name
  std::uint64_t pending = 0;  // jobs it holds
  std::int64_t idle_ms = 0;   // since it last claimed or renewed anything
};

struct queue_stats {
  std::string queue;
  // Now: ready, waiting for a due time, held by workers, dead (kept).
  std::uint64_t queued = 0;
  std::uint64_t delayed = 0;
  std::uint64_t running = 0;
  std::uint64_t dead = 0;
  // Since the queue began: jobs submitted, results recorded, attempts failed, retries
  // scheduled, jobs that died, jobs cancelled, leases taken over, jobs handed back by stopping
  // workers, malformed stream entries buried, dead jobs requeued.
  std::uint64_t submitted = 0;
  std::uint64_t done = 0;
  std::uint64_t failed = 0;
  std::uint64_t retried = 0;
  std::uint64_t died = 0;
  std::uint64_t cancelled = 0;
  std::uint64_t takeovers = 0;
  std::uint64_t handed_back = 0;
  std::uint64_t malformed = 0;
  std::uint64_t requeued = 0;
  // How long the oldest ready job has waited (0 if none), by Redis's clock.
  std::int64_t lag_ms = 0;
  bool paused = false;
  std::uint64_t max_length = 0;  // 0 = unbounded
  std::vector<worker_info> workers;
};

// The job, and the queue's figures, as JSON objects (the fields above, with the state and
// the priority as words). Strings are bytes: valid UTF-8 passes through, and a byte that is
// not part of valid UTF-8 is written as \u00XX, so any result prints as valid JSON.
std::string to_json(const job_status& s);
std::string to_json(const queue_stats& s);

class admin {
 public:
  // Parses the URL (errc::invalid_argument); connects on first use.
  explicit admin(std::string_view store_url, connection_options options = {});
  ~admin();
  admin(const admin&) = delete;
  admin& operator=(const admin&) = delete;

  // Each call is one round trip, safe from many threads (they share one connection, in
  // turn). Errors: invalid_argument (a malformed id or name), not_found, wrong_state,
  // unavailable, outcome_unknown (for the calls that change something), redis_error.
  job_status status(std::string_view job_id);
  queue_stats stats(std::string_view queue);
  std::vector<std::string> queues();  // every queue a job was submitted to or configured
  // The oldest `limit` dead jobs (id, task, attempt, error and finished_ms filled in).
  std::vector<job_status> dead(std::string_view queue, std::size_t limit = 100);

  // Cancels a job: queued or delayed, it never starts; running, its attempt no longer holds
  // it (the worker fires the handler's token at its next renewal) and it is not retried.
  // Returns the state it was in. wrong_state if it had ended already.
  job_state cancel(std::string_view job_id);
  // A dead job runs again (failures and takeovers from 0), or is deleted. wrong_state unless
  // dead.
  void requeue(std::string_view job_id);
  void remove(std::string_view job_id);
  // No job of the queue starts while it is paused (running ones finish; submissions are
  // accepted and wait).
  void pause(std::string_view queue);
  void resume(std::string_view queue);
  // The most jobs the queue holds waiting (queued + delayed) before producers meet their
  // full policy; 0 = unbounded.
  void set_max_length(std::string_view queue, std::uint64_t max_length);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace spool::queue
