// A producer's side of results: one list in Redis, "spool:reply:ID", that workers push each
// outcome to (functions.lua, notify), and one thread that waits on it (BLMPOP) and completes
// the futures of the jobs it names.
//
// An outcome may arrive before the submission that made the job has returned (a fast job):
// it waits in `early_` until expect() asks for it, for at most a minute. An outcome whose push
// was lost (popped on a connection that then broke, or written on a primary that failed
// before its replica had it) is found by looking the job up: every `recheck`, the thread asks
// Redis (spool_peek) for the jobs it has waited on longer than that. With `replicas`, an
// outcome is passed on only once WAIT says the replicas have it (the pop, and so everything
// before it), so that a failover cannot take back a result a caller has seen.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "redis_link.hpp"
#include "spool/future.hpp"
#include "wakeup.hpp"

namespace spool::queue::detail {

struct durability {
  unsigned replicas = 0;
  std::chrono::milliseconds replica_timeout{1000};
};

class result_router {
 public:
  result_router(std::shared_ptr<const redis_target> target, connection_options options,
                spool::pool& pool, durability d, std::chrono::milliseconds recheck);
  // Stops the thread; the futures still waiting complete with spool::task_cancelled.
  ~result_router();
  result_router(const result_router&) = delete;
  result_router& operator=(const result_router&) = delete;

  // The list to name in spool_submit and spool_watch.
  [[nodiscard]] const std::string& reply_list() const noexcept { return list_; }
  // A future for the job's outcome (starts the thread on first use).
  spool::future<std::string> expect(const std::string& job_id);
  // A future completed at once, for a job found final ("done", "dead", "cancelled").
  spool::future<std::string> completed(const std::string& state, const std::string& data);

 private:
  struct outcome {
    char kind;  // 'D' done, 'X' dead, 'C' cancelled
    std::string data;
  };
  struct waiting {
    std::vector<spool::promise<std::string>> promises;
    std::chrono::steady_clock::time_point since;
    std::chrono::steady_clock::time_point next_check;
  };
  struct early_outcome {
    outcome what;
    std::chrono::steady_clock::time_point arrived;
  };

  void run();
  // Pops outcomes (waiting up to a second); false if woken to stop.
  bool pop_outcomes(std::vector<std::pair<std::string, outcome>>& out);
  // Looks up the jobs waited on for longer than recheck_.
  void recheck(std::chrono::steady_clock::time_point now);
  bool replicas_confirm();
  void deliver(const std::string& id, const outcome& o);
  static void complete(spool::promise<std::string>& p, const outcome& o);

  spool::pool& pool_;
  durability durability_;
  std::chrono::milliseconds recheck_;
  std::string list_;
  redis_link link_;
  wakeup stop_;

  std::mutex mu_;
  std::unordered_map<std::string, waiting> waiting_;
  std::unordered_map<std::string, early_outcome> early_;
  bool started_ = false;
  std::thread thread_;
};

}  // namespace spool::queue::detail
