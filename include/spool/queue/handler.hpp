// spool/queue/handler.hpp: the function that runs a task.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "spool/queue/job.hpp"

namespace spool::queue {

// Runs one attempt of a job: the payload's bytes in, the result's bytes out. An exception is
// the attempt's error (its what(), or "unknown exception"); the job is then retried after its
// backoff while it has attempts left, and dead after that. Runs on a pool worker; it should
// watch job.token in long work.
using handler = std::function<std::string(const job_context& job, std::string_view payload)>;

}  // namespace spool::queue
