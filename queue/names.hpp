// The names the queue accepts (queues, tasks, keys, job ids) and the Redis keys built from
// them. Every check throws error(errc::invalid_argument) with a message that says what is
// allowed.
#pragma once

#include <string>
#include <string_view>

namespace spool::queue::detail {

// 1 to 128 of A-Z a-z 0-9 - _ . : (no spaces: a queue name is part of Redis keys and of job
// ids, "QUEUE/N").
void check_queue_name(std::string_view queue);
// The same characters, 1 to 128 of them.
void check_task_name(std::string_view task);
// Any bytes, at most 512 ("" = none).
void check_job_key(std::string_view key);

// "spool:{QUEUE}": every key of a queue starts so (one hash slot).
std::string queue_prefix(std::string_view queue);

// A job id, "QUEUE/N", split. N is a number, or "bad-..." for a buried malformed entry.
struct job_ref {
  std::string queue;
  std::string number;
  [[nodiscard]] std::string id() const { return queue + "/" + number; }
};
job_ref parse_job_id(std::string_view id);

}  // namespace spool::queue::detail
