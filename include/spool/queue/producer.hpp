// spool/queue/producer.hpp: submitting jobs, and their results as spool futures.
//
//   spool::queue::producer jobs("redis://127.0.0.1:6379");
//   auto s = jobs.submit("mail", "send", payload, {.key = "order-1234", .attempts = 3});
//   s.id;                                  // "mail/17": acknowledged (durable, see below)
//   std::string r = s.result.get();        // waits; job_failed / job_cancelled on failure
//   s.result.then([](std::string r) {...}) // or co_await std::move(s.result) in a spool::task
//
// In a coroutine, submit into a variable and co_await its result: g++ 12 destroys the
// temporaries of submit()'s default argument twice inside a co_await expression
// (co_await p.submit(...).result).
//
// Acknowledged means durable: submit() returns once Redis has executed the submission, which
// with `appendfsync always` means it is in the primary's append-only file, and, with
// `replicas` K > 0, once K replicas confirmed it (WAIT). A submission whose confirmation did
// not come throws errc::outcome_unknown: submitting again with the same key is safe.
//
// A result arrives by a list of this producer's in Redis that the job's worker pushes the
// outcome to; one thread per producer waits on it and completes the futures (their
// continuations run on `pool`). Outcomes it missed (a failover lost the push) are looked up
// every `recheck`. Destroying the producer completes every future still waiting with
// spool::task_cancelled (the jobs go on; watch() finds them again).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spool/future.hpp"
#include "spool/queue/connection.hpp"
#include "spool/queue/error.hpp"
#include "spool/queue/handler.hpp"
#include "spool/queue/job.hpp"
#include "spool/spool.hpp"

namespace spool::queue {

struct producer_options {
  connection_options connection;
  // Acknowledge a submission only once this many replicas have it (Redis WAIT), waiting at
  // most replica_timeout; 0 = the primary alone.
  unsigned replicas = 0;
  std::chrono::milliseconds replica_timeout{1000};
  // A queue at its maximum length (admin::set_max_length): the pool's policies. block waits
  // for room (checking with a backoff from 1 to 50 ms), block_for waits at most
  // block_timeout then throws errc::timed_out, reject throws errc::full, caller_runs runs the
  // job's handler (producer::handle) in the submitting thread. discard_oldest is refused
  // (errc::invalid_argument): a producer does not drop other producers' jobs.
  spool::full_policy on_full = spool::full_policy::block;
  std::chrono::milliseconds block_timeout{1000};
  // Where the futures' continuations run; nullptr = spool::default_pool().
  spool::pool* pool = nullptr;
  // The largest payload accepted (errc::too_large beyond): 1 byte .. 512 MiB - 64 KiB.
  std::size_t max_payload = std::size_t{16} << 20;
  // A job whose outcome has not arrived this long after its submission is looked up in Redis
  // (and again each period): a safety net for a push lost in a failover.
  std::chrono::milliseconds recheck{5000};
};

// A submission's answer.
struct submitted {
  std::string id;         // "QUEUE/N"; "" when the job ran here (caller_runs)
  bool existing = false;  // the key named a job submitted before: this is that job
  bool ran_here = false;  // the queue was full and the handler ran in the calling thread
  spool::future<std::string> result;  // the result's bytes; get() throws job_failed (dead) or
                                      // job_cancelled
};

// One job of a bulk submission.
struct job_spec {
  std::string task;
  std::string payload;
  job_options options;
};

class producer {
 public:
  // Parses the URL (errc::invalid_argument if malformed, or if the options are out of range);
  // connects on first use, so a Redis that is down does not make this throw.
  explicit producer(std::string_view store_url, producer_options options = {});
  ~producer();
  producer(const producer&) = delete;
  producer& operator=(const producer&) = delete;

  // Submits one job and returns once it is acknowledged. Throws error: invalid_argument (a
  // queue or task name, key or option out of range), too_large, unavailable (nothing
  // submitted), outcome_unknown, full / timed_out (see on_full), shut_down. Safe to call from
  // many threads at once (each uses a connection of its own).
  submitted submit(std::string_view queue, std::string_view task, std::string_view payload = {},
                   const job_options& options = {});
  // Submits many jobs in one round trip (and one WAIT). Every job is checked before anything
  // is sent. A full queue applies on_full to the jobs it refused, in order (block retries
  // them, reject and block_for throw after the accepted ones are submitted: the message says
  // how many). Returns one answer per job, in order.
  std::vector<submitted> submit_bulk(std::string_view queue, std::span<const job_spec> jobs);

  // The result of any job by its id, as a future (whoever submitted it).
  // errc::not_found if there is no such job.
  spool::future<std::string> watch(std::string_view job_id);

  // Registers the handler that caller_runs uses for `task`. Before the first submission
  // (errc::wrong_order after).
  void handle(std::string task, handler h);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace spool::queue
