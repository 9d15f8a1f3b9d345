// The driver whose connections run their blocking jobs inline, on the thread that serves them:
// every model but epoll (a thread or process per connection has nothing else to do; the poll
// model has nobody else to give the job to), and the threads that linger on refused
// connections, which never run a job.
#pragma once

#include "conn/connection.hpp"
#include "event/stop_signal.hpp"

namespace spoold {

class inline_driver final : public connection_driver {
 public:
  explicit inline_driver(const stop_signal& stop) noexcept : connection_driver(stop) {}

  // The thread has nothing else to do (or, in poll, nobody else to give the job to).
  std::optional<http::response> run_job(connection& c, blocking_job&& job) override {
    (void)c;
    return run_job_here(job);
  }
};

}  // namespace spoold
