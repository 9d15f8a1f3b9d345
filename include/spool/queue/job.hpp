// spool/queue/job.hpp: a job's options, its states, and what a handler sees of it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "spool/spool.hpp"
#include "spool/task_group.hpp"

namespace spool::queue {

// How one job is to run. Every field has a range; a value outside it is refused with
// errc::invalid_argument (the message names the field).
struct job_options {
  // Run no earlier than this from now (0 .. 10 years), measured by Redis's clock.
  std::chrono::milliseconds delay{0};
  // Or run no earlier than this time of the producer's clock (overrides delay; a time already
  // past means now).
  std::optional<std::chrono::system_clock::time_point> due;
  // The pool's three levels: higher first, FIFO within a level, and aging (worker_options)
  // so that a level with work waiting is served at least once per aging period.
  spool::priority priority = spool::priority::normal;
  // Deduplication: a second submission with the same key, while the first job or its result
  // is kept, returns the first job (done or not) and queues nothing. "" = no key. At most
  // 512 bytes, any bytes.
  std::string key;
  // Runs that may fail (an exception, the time limit) before the job is dead: 1 .. 1000.
  unsigned attempts = 1;
  // The wait before the second attempt, doubling with each failure up to backoff_max, each
  // wait drawn at random between half and all of it (jitter). 0 .. 30 days each.
  std::chrono::milliseconds backoff{1000};
  std::chrono::milliseconds backoff_max{std::chrono::hours(1)};
  // The most one attempt may run (0 = no limit, at most 30 days): past it the handler's token
  // fires and the attempt counts as failed ("time limit of N ms exceeded").
  std::chrono::milliseconds time_limit{0};
  // How long the outcome (result or error) and the key are kept once the job is done or
  // cancelled; 0 = until deleted. At most 10 years. Dead jobs are kept until requeued or
  // deleted.
  std::chrono::seconds result_ttl{std::chrono::hours(24)};
  // Leases the job may lose (its worker died, hung or lost Redis; another worker took the job
  // over) before it is dead instead of taken over again: 0 .. 1000.
  unsigned takeovers = 5;
};

enum class job_state {
  queued,     // ready, waiting in its stream for a worker
  delayed,    // waiting for its due time (a delay, or a retry's backoff)
  running,    // an attempt holds it (a worker's lease)
  done,       // final: a result is recorded
  dead,       // final: it ran out of attempts or takeovers, or was malformed; kept, requeueable
  cancelled,  // final: cancelled before it finished
};

// "queued", "delayed", ...
std::string_view to_string(job_state s) noexcept;
// The reverse; errc::invalid_argument for anything else.
job_state job_state_from(std::string_view text);

// What a handler sees of the job it runs. The views are valid during the call.
struct job_context {
  std::string_view queue;
  std::string_view id;  // "QUEUE/N"
  std::string_view task;
  std::string_view key;  // "" if submitted without one
  // 1 for the first run; each run of the job (a retry, a takeover, a run after a hand-back)
  // has a larger number. With the key, it makes side effects idempotent: the outcome that
  // counts is the one of the attempt that holds the lease when it is recorded.
  std::uint64_t attempt = 0;
  // Fires when this attempt should stop: the job was cancelled, its lease was lost (another
  // worker took it over), its time limit passed, or the worker is stopping and hands it back.
  spool::cancellation_token token;
};

}  // namespace spool::queue
