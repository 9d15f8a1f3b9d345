#include "lease_keeper.hpp"

#include <algorithm>

#include "../replies.hpp"

namespace spool::queue::detail {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

}  // namespace

lease_keeper::lease_keeper(worker_core& core, reporter& report)
    : core_(core), report_(report), link_(core.target, core.options.connection) {}

lease_keeper::~lease_keeper() { finish(); }

void lease_keeper::start() {
  thread_ = std::thread([this] { run(); });
}

void lease_keeper::finish() {
  done_.signal();
  if (thread_.joinable()) thread_.join();
}

steady::time_point lease_keeper::enforce_limits(steady::time_point now) {
  steady::time_point next = steady::time_point::max();
  for (const std::shared_ptr<held_job>& job : core_.held.snapshot()) {
    if (job->limit.count() == 0 || job->state.load(std::memory_order_acquire) != phase::running) {
      continue;
    }
    const steady::time_point deadline =
        steady::time_point(steady::duration(job->started.load(std::memory_order_acquire))) +
        job->limit;
    if (deadline > now) {
      next = std::min(next, deadline);
      continue;
    }
    if (!job->move(phase::running, phase::expired)) continue;  // it returned just now
    job->fire_token();
    report_.push(outcome{job, false,
                         "time limit of " + std::to_string(job->limit.count()) + " ms exceeded"});
  }
  return next;
}

void lease_keeper::renew(const std::vector<std::shared_ptr<held_job>>& jobs) {
  command renew = fcall("spool_renew", core_.options.queue);
  renew.add(core_.name).add(static_cast<std::uint64_t>(jobs.size()));
  for (const std::shared_ptr<held_job>& job : jobs) {
    renew.add(job->number).add(job->attempt).add(job->entry).add(job->level);
  }
  const reply_handle r = link_.call(renew, effect::writes);
  const redisReply& codes = array_of(*r, jobs.size(), "spool_renew");
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const std::int64_t code = integer_of(*codes.element[i], "spool_renew");
    if (code == 1) continue;
    held_job& job = *jobs[i];
    const phase now = job.state.load(std::memory_order_acquire);
    if (now == phase::reporting || now == phase::expired) continue;  // the reporter's to settle
    const phase was = job.lose();
    if (was == phase::lost) continue;
    job.fire_token();
    core_.held.remove(job);
    worker_metrics::add(code == 2 ? core_.metrics.cancelled : core_.metrics.lost);
    if (code == 0)
      core_.log("lost the lease of " + job.id + " (attempt " + std::to_string(job.attempt) +
                "): another attempt holds it now");
  }
}

void lease_keeper::run() {
  const auto every = std::max<std::chrono::milliseconds>(core_.options.lease / 3, 1ms);
  auto next_renewal = steady::now() + every;
  auto pause = 50ms;
  while (true) {
    const steady::time_point now = steady::now();
    const steady::time_point next_limit = enforce_limits(now);
    if (now >= next_renewal) {
      const std::vector<std::shared_ptr<held_job>> jobs = core_.held.snapshot();
      try {
        if (!jobs.empty()) renew(jobs);
        next_renewal = now + every;
        pause = 50ms;
      } catch (const error& e) {
        worker_metrics::add(core_.metrics.redis_errors);
        core_.log(std::string("renewing leases: ") + e.what());
        next_renewal = now + std::min<std::chrono::milliseconds>(pause, every);
        pause = std::min<std::chrono::milliseconds>(pause * 2, 1000ms);
      }
    }
    const auto wake_at = std::min(next_renewal, next_limit);
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake_at - steady::now());
    if (wait_either(done_, core_.limit_started, std::max(wait, 0ms)) == 1) return;
  }
}

}  // namespace spool::queue::detail
