// The admin: each call one function of functions.lua, on one shared connection.
#include "spool/queue/admin.hpp"

#include <charconv>
#include <mutex>
#include <unordered_map>

#include "names.hpp"
#include "redis_link.hpp"
#include "replies.hpp"

namespace spool::queue {
namespace {

using detail::command;
using detail::effect;
using detail::reply_handle;

std::int64_t number(const std::string& text) {
  std::int64_t n = 0;
  std::from_chars(text.data(), text.data() + text.size(), n);
  return n;
}

// A flat reply of names and values, as a map of texts (arrays left out).
std::unordered_map<std::string, std::string> fields_of(const redisReply& r, std::string_view what) {
  const redisReply& a = detail::array_of(r, 0, what);
  std::unordered_map<std::string, std::string> out;
  for (std::size_t i = 0; i + 1 < a.elements; i += 2) {
    if (a.element[i + 1]->type == REDIS_REPLY_ARRAY) continue;
    out[detail::text_of(*a.element[i], what)] = detail::text_of(*a.element[i + 1], what);
  }
  return out;
}

job_status status_from(const detail::job_ref& ref,
                       const std::unordered_map<std::string, std::string>& f) {
  const auto get = [&](const char* name) {
    const auto it = f.find(name);
    return it == f.end() ? std::string() : it->second;
  };
  job_status s;
  s.id = ref.id();
  s.queue = ref.queue;
  s.task = get("task");
  s.key = get("key");
  s.state = job_state_from(get("state"));
  const std::int64_t prio = number(get("prio"));
  s.priority = prio == 0   ? spool::priority::low
               : prio == 2 ? spool::priority::high
                           : spool::priority::normal;
  s.attempt = static_cast<std::uint64_t>(number(get("attempt")));
  s.attempts = static_cast<std::uint64_t>(number(get("attempts")));
  s.failures = static_cast<std::uint64_t>(number(get("failures")));
  s.takeovers = static_cast<std::uint64_t>(number(get("takeovers")));
  s.outcomes = static_cast<std::uint64_t>(number(get("outcomes")));
  s.outcome_attempt = static_cast<std::uint64_t>(number(get("outcome_attempt")));
  s.owner = get("owner");
  s.result = get("result");
  s.error = get("error");
  s.payload_size = get("payload").size();
  s.created_ms = number(get("created"));
  s.due_ms = number(get("due"));
  s.started_ms = number(get("started"));
  s.finished_ms = number(get("finished"));
  return s;
}

}  // namespace

struct admin::impl {
  impl(std::string_view url, connection_options o)
      : target(std::make_shared<detail::redis_target>(url, o.connect_timeout)), link(target, o) {}

  reply_handle call(const command& c, effect e) {
    std::lock_guard lock(mu);
    return link.call(c, e);
  }
  // Runs FUNCTION on the job and returns its reply.
  reply_handle on_job(std::string_view function, std::string_view job_id, effect e,
                      detail::job_ref& ref) {
    ref = detail::parse_job_id(job_id);
    command c = detail::fcall(function, ref.queue);
    c.add(ref.number);
    return call(c, e);
  }

  void control(std::string_view queue, std::string_view what, std::string_view value = {}) {
    detail::check_queue_name(queue);
    command c = detail::fcall("spool_control", queue);
    c.add(what);
    if (!value.empty()) c.add(value);
    const reply_handle r = call(c, effect::writes);
    detail::check_not_error(*r, "spool_control");
  }

  std::shared_ptr<detail::redis_target> target;
  std::mutex mu;
  detail::redis_link link;
};

admin::admin(std::string_view store_url, connection_options options)
    : impl_(std::make_unique<impl>(store_url, options)) {}

admin::~admin() = default;

job_status admin::status(std::string_view job_id) {
  detail::job_ref ref;
  const reply_handle r = impl_->on_job("spool_status", job_id, effect::reads, ref);
  return status_from(ref, fields_of(*r, "spool_status"));
}

queue_stats admin::stats(std::string_view queue) {
  detail::check_queue_name(queue);
  const reply_handle r = impl_->call(detail::fcall("spool_stats", queue), effect::reads);
  const auto f = fields_of(*r, "spool_stats");
  const auto get = [&](const char* name) -> std::uint64_t {
    const auto it = f.find(name);
    const std::int64_t n = it == f.end() ? 0 : number(it->second);
    return n < 0 ? 0 : static_cast<std::uint64_t>(n);  // a gauge is never below 0
  };
  queue_stats s;
  s.queue = std::string(queue);
  s.queued = get("queued");
  s.delayed = get("delayed");
  s.running = get("running");
  s.dead = get("dead_now");
  s.submitted = get("submitted");
  s.done = get("done");
  s.failed = get("failed");
  s.retried = get("retried");
  s.died = get("dead");
  s.cancelled = get("cancelled");
  s.takeovers = get("takeovers");
  s.handed_back = get("handed_back");
  s.malformed = get("malformed");
  s.requeued = get("requeued");
  s.lag_ms = static_cast<std::int64_t>(get("lag_ms"));
  s.paused = get("paused") != 0;
  s.max_length = get("max");
  const redisReply& a = *r;
  for (std::size_t i = 0; i + 1 < a.elements; i += 2) {
    if (detail::text_of(*a.element[i], "spool_stats") != "workers") continue;
    const redisReply& list = detail::array_of(*a.element[i + 1], 0, "spool_stats");
    for (std::size_t k = 0; k < list.elements; ++k) {
      const redisReply& w = detail::array_of(*list.element[k], 3, "spool_stats");
      s.workers.push_back(
          worker_info{detail::text_of(*w.element[0], "spool_stats"),
                      static_cast<std::uint64_t>(detail::integer_of(*w.element[1], "spool_stats")),
                      detail::integer_of(*w.element[2], "spool_stats")});
    }
  }
  return s;
}

std::vector<std::string> admin::queues() {
  const reply_handle r = impl_->call(command{"FCALL_RO", "spool_queues", "0"}, effect::reads);
  const redisReply& a = detail::array_of(*r, 0, "spool_queues");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < a.elements; ++i) {
    out.push_back(detail::text_of(*a.element[i], "spool_queues"));
  }
  return out;
}

std::vector<job_status> admin::dead(std::string_view queue, std::size_t limit) {
  detail::check_queue_name(queue);
  if (limit < 1 || limit > 100000) {
    throw error(errc::invalid_argument, "admin::dead: limit must be from 1 to 100000");
  }
  command c = detail::fcall("spool_dead", queue);
  c.add(static_cast<std::uint64_t>(limit));
  const reply_handle r = impl_->call(c, effect::reads);
  const redisReply& a = detail::array_of(*r, 0, "spool_dead");
  std::vector<job_status> out;
  for (std::size_t i = 0; i < a.elements; ++i) {
    const redisReply& d = detail::array_of(*a.element[i], 5, "spool_dead");
    job_status s;
    s.id = detail::text_of(*d.element[0], "spool_dead");
    s.queue = std::string(queue);
    s.state = job_state::dead;
    s.finished_ms = detail::integer_of(*d.element[1], "spool_dead");
    s.task = detail::text_of(*d.element[2], "spool_dead");
    s.attempt = static_cast<std::uint64_t>(detail::integer_of(*d.element[3], "spool_dead"));
    s.error = detail::text_of(*d.element[4], "spool_dead");
    out.push_back(std::move(s));
  }
  return out;
}

job_state admin::cancel(std::string_view job_id) {
  detail::job_ref ref;
  const reply_handle r = impl_->on_job("spool_cancel", job_id, effect::writes, ref);
  return job_state_from(detail::text_of(*r, "spool_cancel"));
}

void admin::requeue(std::string_view job_id) {
  detail::job_ref ref;
  const reply_handle r = impl_->on_job("spool_requeue", job_id, effect::writes, ref);
  detail::check_not_error(*r, "spool_requeue");
}

void admin::remove(std::string_view job_id) {
  detail::job_ref ref;
  const reply_handle r = impl_->on_job("spool_delete", job_id, effect::writes, ref);
  detail::check_not_error(*r, "spool_delete");
}

void admin::pause(std::string_view queue) { impl_->control(queue, "pause"); }

void admin::resume(std::string_view queue) { impl_->control(queue, "resume"); }

void admin::set_max_length(std::string_view queue, std::uint64_t max_length) {
  impl_->control(queue, "max", std::to_string(max_length));
}

}  // namespace spool::queue
