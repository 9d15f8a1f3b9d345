#include <algorithm>
#include <chrono>
#include <string>

#include "job_encoding.hpp"
#include "names.hpp"
#include "replies.hpp"
#include "spool/queue/error.hpp"
#include "spool/queue/job.hpp"

namespace spool::queue {

std::string_view to_string(job_state s) noexcept {
  switch (s) {
    case job_state::queued:
      return "queued";
    case job_state::delayed:
      return "delayed";
    case job_state::running:
      return "running";
    case job_state::done:
      return "done";
    case job_state::dead:
      return "dead";
    case job_state::cancelled:
      return "cancelled";
  }
  return "unknown";
}

job_state job_state_from(std::string_view text) {
  for (job_state s : {job_state::queued, job_state::delayed, job_state::running, job_state::done,
                      job_state::dead, job_state::cancelled}) {
    if (to_string(s) == text) return s;
  }
  throw error(errc::invalid_argument, "unknown job state \"" + std::string(text) + "\"");
}

namespace detail {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds max_delay = std::chrono::days(3653);
constexpr milliseconds max_wait = std::chrono::days(30);
constexpr std::chrono::seconds max_ttl = std::chrono::days(3653);
constexpr unsigned max_attempts = 1000;
constexpr unsigned max_takeovers = 1000;
// What Redis takes in one bulk string, less room for the rest of the command.
constexpr std::size_t largest_payload = (std::size_t{512} << 20) - (std::size_t{64} << 10);

void refuse(const std::string& what) { throw error(errc::invalid_argument, what); }

void check_range(std::string_view name, milliseconds value, milliseconds max) {
  if (value < 0ms || value > max) {
    refuse("job option " + std::string(name) + " = " + std::to_string(value.count()) +
           " ms: must be from 0 to " + std::to_string(max.count()) + " ms");
  }
}

milliseconds delay_of(const job_options& o) {
  if (!o.due) return o.delay;
  const auto left = std::chrono::ceil<milliseconds>(*o.due - std::chrono::system_clock::now());
  return std::clamp(left, 0ms, max_delay);
}

}  // namespace

void check_job(std::string_view task, std::string_view payload, const job_options& o,
               std::size_t max_payload) {
  check_task_name(task);
  check_job_key(o.key);
  if (payload.size() > std::min(max_payload, largest_payload)) {
    throw error(errc::too_large, "payload of " + std::to_string(payload.size()) +
                                     " bytes: the limit is " +
                                     std::to_string(std::min(max_payload, largest_payload)));
  }
  if (!o.due) check_range("delay", o.delay, max_delay);
  check_range("backoff", o.backoff, max_wait);
  check_range("backoff_max", o.backoff_max, max_wait);
  check_range("time_limit", o.time_limit, max_wait);
  if (o.result_ttl < 0s || o.result_ttl > max_ttl) {
    refuse("job option result_ttl = " + std::to_string(o.result_ttl.count()) +
           " s: must be from 0 to " + std::to_string(max_ttl.count()) + " s");
  }
  if (o.attempts < 1 || o.attempts > max_attempts) {
    refuse("job option attempts = " + std::to_string(o.attempts) + ": must be from 1 to 1000");
  }
  if (o.takeovers > max_takeovers) {
    refuse("job option takeovers = " + std::to_string(o.takeovers) + ": must be from 0 to 1000");
  }
  const auto p = static_cast<unsigned>(o.priority);
  if (p > 2) refuse("job option priority = " + std::to_string(p) + ": must be low, normal or high");
}

void append_job(command& c, std::string_view task, std::string_view payload, const job_options& o) {
  c.add(task).add(payload).add(o.key);
  c.add(static_cast<unsigned>(o.priority));
  c.add(static_cast<std::int64_t>(delay_of(o).count()));
  c.add(o.attempts);
  c.add(static_cast<std::int64_t>(o.backoff.count()));
  c.add(static_cast<std::int64_t>(o.backoff_max.count()));
  c.add(static_cast<std::int64_t>(o.time_limit.count()));
  c.add(static_cast<std::int64_t>(o.result_ttl.count()));
  c.add(o.takeovers);
}

submit_answer read_submit_answer(const redisReply& r) {
  const redisReply& a = array_of(r, 4, "spool_submit");
  submit_answer out;
  out.id = text_of(*a.element[0], "spool_submit");
  const std::string status = text_of(*a.element[1], "spool_submit");
  if (status == "existing") {
    out.what = submit_answer::kind::existing;
  } else if (status == "full") {
    out.what = submit_answer::kind::full;
  } else if (status != "new") {
    throw error(errc::redis_error, "spool_submit: unexpected status \"" + status + "\"");
  }
  out.state = text_of(*a.element[2], "spool_submit");
  out.data = text_of(*a.element[3], "spool_submit");
  return out;
}

}  // namespace detail
}  // namespace spool::queue
