// A job as spool_submit takes it (11 arguments, functions.lua) and the answer it gives, and
// the checks every job goes through before anything is sent.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "command.hpp"
#include "spool/queue/job.hpp"

namespace spool::queue::detail {

// Checks the task name, key, payload size and option ranges; error(invalid_argument or
// too_large) names what is wrong.
void check_job(std::string_view task, std::string_view payload, const job_options& options,
               std::size_t max_payload);
// Appends the job's 11 arguments (the options checked already).
void append_job(command& c, std::string_view task, std::string_view payload,
                const job_options& options);

// One element of spool_submit's answer.
struct submit_answer {
  std::string id;
  enum class kind { created, existing, full } what = kind::created;
  std::string state;  // "queued", "delayed", "done", ...
  std::string data;   // the result or error of an existing job that is final
};
submit_answer read_submit_answer(const redisReply& r);

}  // namespace spool::queue::detail
