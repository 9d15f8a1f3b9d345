// spool/queue/worker.hpp: running a queue's jobs on a spool pool.
//
//   spool::queue::worker w("redis://127.0.0.1:6379", {.queue = "mail", .threads = 8});
//   w.handle("send", [](const spool::queue::job_context& job, std::string_view payload) {
//     return send_mail(payload, job.key, job.attempt);   // the result's bytes
//   });
//   w.start();
//   ...
//   w.stop();   // SIGTERM's behaviour: stop claiming, finish or hand back, return
//
// Three threads of the worker talk to Redis, each on a connection of its own; handlers run on
// the pool. The dispatcher claims jobs, never more than the pool has room for (free threads
// plus `prefetch`), so an idle worker elsewhere gets the rest. The lease keeper renews the
// lease of every job the worker holds, every lease / 3: a handler that keeps a CPU busy for
// hours keeps its lease, and one that hangs keeps it too (give such jobs a time limit). The
// reporter records outcomes, many per round trip. A worker that dies, hangs (SIGSTOP) or loses
// Redis for longer than `lease` loses its jobs: another worker takes each over within lease +
// check_interval, under a new attempt number, and whatever the old attempt records later is
// refused (queue/README.md, "Fencing").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "spool/queue/connection.hpp"
#include "spool/queue/error.hpp"
#include "spool/queue/handler.hpp"
#include "spool/spool.hpp"

namespace spool::queue {

struct worker_options {
  std::string queue;
  // The pool to run handlers on; nullptr = a pool of the worker's own with `threads` threads
  // (0 = one per CPU).
  spool::pool* pool = nullptr;
  unsigned threads = 0;
  // Jobs claimed beyond the free threads, to hide the claim's round trip (they wait in the
  // pool's queue, holding their leases). 0 .. 10000.
  unsigned prefetch = 0;
  // A job's lease: how long a worker may go without renewing before another may take the job
  // over. Every worker of a queue should use the same. 100 ms .. 1 day.
  std::chrono::milliseconds lease{30000};
  // How often an idle worker looks for expired leases and due jobs it was not told of
  // (at most lease / 2). 10 ms .. 1 hour.
  std::chrono::milliseconds check_interval{1000};
  // Whether an idle worker lists itself (for 2 check intervals at a time) so that a
  // submission starts a job for it at once and puts it in the worker's inbox: the job then
  // starts without a claim of its own, one write to Redis (and, under appendfsync always, one
  // fsync) fewer. false: every job waits in its stream until a worker claims it.
  bool direct = true;
  // On stop(): how long running handlers may take to finish before their jobs are handed
  // back (their tokens fire). 0 = hand back at once.
  std::chrono::milliseconds drain_timeout{30000};
  // A level with work waiting is served at least once per aging period (0 = strict levels).
  std::chrono::milliseconds aging{100};
  // The consumer name in the queue's group; "" = "HOST:PID:RANDOM". Unique per process.
  std::string name;
  connection_options connection;
  // The largest result recorded; a larger one fails the attempt (errc::too_large's message).
  std::size_t max_result = std::size_t{16} << 20;
  // Told of trouble (Redis unreachable, a failover, a stop's progress), one line at a time,
  // the same line at most once a second; from the worker's threads. Empty: stderr.
  std::function<void(std::string_view line)> on_log;
};

// The worker's counters since it started (a snapshot; each field read atomically).
struct worker_counters {
  std::uint64_t started = 0;       // attempts started (handler called)
  std::uint64_t given = 0;         // jobs a submission started for this idle worker (its inbox)
  std::uint64_t done = 0;          // results recorded
  std::uint64_t failed = 0;        // attempts that failed (exception, time limit)
  std::uint64_t retried = 0;       // of those, jobs that will run again
  std::uint64_t dead = 0;          // of those, jobs that are now dead
  std::uint64_t takeovers = 0;     // jobs this worker took over from an expired lease
  std::uint64_t lost = 0;          // attempts whose lease this worker lost
  std::uint64_t stale = 0;         // outcomes refused (the attempt no longer held the lease)
  std::uint64_t cancelled = 0;     // attempts stopped because the job was cancelled
  std::uint64_t handed_back = 0;   // jobs handed back on stop()
  std::uint64_t in_flight = 0;     // jobs held now
  std::uint64_t redis_errors = 0;  // round trips that failed (connection, timeout)
  // Handler run times: counts per bucket (upper bounds in seconds: handler_time_bounds()),
  // cumulative as Prometheus wants them, and their sum.
  std::vector<std::uint64_t> handler_time_buckets;
  std::uint64_t handler_time_count = 0;
  double handler_time_sum_s = 0;
};

class worker {
 public:
  // Parses the URL and checks the options (errc::invalid_argument); connects in start().
  worker(std::string_view store_url, worker_options options);
  // stop() if started, then waits for the worker's threads (and, for its own pool, for the
  // handlers still running).
  ~worker();
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  // Registers the handler for `task`, before start() (errc::wrong_order after). A job whose
  // task has no handler fails its attempt with "unknown task 'X'" (retried, as another worker
  // may know it).
  void handle(std::string task, handler h);

  // Starts claiming. Returns at once: a Redis that is down is retried in the background.
  // Once only (errc::wrong_order).
  void start();

  // Stops claiming, hands back at once the jobs claimed but not started, waits up to
  // drain_timeout for running handlers, hands back the jobs still running (their tokens
  // fire), waits for their outcomes to be recorded and returns. Any thread, any number of
  // times; before start(), nothing to do.
  void stop();
  // Asks for stop() without waiting; async-signal-safe (a write to an eventfd), for a signal
  // handler. wait() then returns when the worker has stopped.
  void request_stop() noexcept;
  void wait();

  [[nodiscard]] const std::string& name() const noexcept;
  [[nodiscard]] worker_counters counters() const;
  // The counters as Prometheus text (spool_queue_worker_*), labelled with the queue.
  [[nodiscard]] std::string prometheus() const;

  // The histogram's upper bounds, in seconds (the last bucket, +Inf, is implicit).
  static const std::vector<double>& handler_time_bounds();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace spool::queue
