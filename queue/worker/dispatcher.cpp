#include "dispatcher.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>
#include <utility>

#include "../names.hpp"
#include "../replies.hpp"

namespace spool::queue::detail {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// A whole decimal number that is all of `text`, or nothing.
std::optional<std::uint64_t> whole_number(std::string_view text) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

}  // namespace

dispatcher::dispatcher(worker_core& core, reporter& report, spool::pool& pool)
    : core_(core),
      report_(report),
      pool_(pool),
      link_(core.target, core.options.connection),
      job_prefix_(queue_prefix(core.options.queue) + ":job:"),
      inbox_key_(queue_prefix(core.options.queue) + ":inbox:" + core.name),
      ready_key_(queue_prefix(core.options.queue) + ":ready") {}

dispatcher::~dispatcher() { join(); }

void dispatcher::start(std::function<void()> on_stopped) {
  on_stopped_ = std::move(on_stopped);
  thread_ = std::thread([this] { run(); });
}

void dispatcher::join() {
  if (thread_.joinable()) thread_.join();
}

void dispatcher::run() {
  claim_loop();
  drain();
  if (on_stopped_) on_stopped_();
}

dispatcher::claim_answer dispatcher::claim(unsigned room, bool takeovers) {
  command c = fcall("spool_claim", core_.options.queue);
  c.add(core_.name).add(room).add(core_.lease_text).add(takeovers ? "1" : "0");
  c.add(core_.aging_text).add(core_.listed_text).add(inbox_read_);
  const reply_handle r = link_.call(c, effect::writes);
  inbox_read_ = "0-0";  // the claim deleted the inbox, and returns the entries not yet read
  const redisReply& a = array_of(*r, 5, "spool_claim");
  claim_answer out;
  const redisReply& jobs = array_of(*a.element[0], 0, "spool_claim");
  for (std::size_t i = 0; i < jobs.elements; ++i) {
    const redisReply& j = array_of(*jobs.element[i], 9, "spool_claim");
    auto job = std::make_shared<held_job>();
    job->id = text_of(*j.element[0], "spool_claim");
    job->number = job->id.substr(job->id.rfind('/') + 1);
    job->attempt = static_cast<std::uint64_t>(integer_of(*j.element[1], "spool_claim"));
    job->task = text_of(*j.element[2], "spool_claim");
    job->payload = text_of(*j.element[3], "spool_claim");
    job->key = text_of(*j.element[4], "spool_claim");
    job->limit = std::chrono::milliseconds(integer_of(*j.element[5], "spool_claim"));
    job->entry = text_of(*j.element[6], "spool_claim");
    job->level = static_cast<int>(integer_of(*j.element[7], "spool_claim"));
    if (integer_of(*j.element[8], "spool_claim") == 1) {
      worker_metrics::add(core_.metrics.takeovers);
    }
    out.jobs.push_back(std::move(job));
  }
  out.next_due_ms = integer_of(*a.element[1], "spool_claim");
  out.paused = integer_of(*a.element[2], "spool_claim") == 1;
  out.idle = integer_of(*a.element[3], "spool_claim") == 1;
  out.listed = static_cast<unsigned>(integer_of(*a.element[4], "spool_claim"));
  return out;
}

std::shared_ptr<held_job> dispatcher::carried_job(const std::string& number,
                                                  const std::string& attempt,
                                                  const redisReply& fields) const {
  // Written by give (functions.lua): job, attempt, task, key, limit, entry, level, payload.
  const std::optional<std::uint64_t> n = whole_number(attempt);
  if (fields.elements != 16 || !n || !whole_number(number)) return nullptr;
  const char* const names[] = {"job",   "attempt", "task",  "key",
                               "limit", "entry",   "level", "payload"};
  for (std::size_t i = 0; i < 8; ++i) {
    if (text_of(*fields.element[2 * i], "XREAD") != names[i]) return nullptr;
  }
  const std::optional<std::uint64_t> limit = whole_number(text_of(*fields.element[9], "XREAD"));
  const std::optional<std::uint64_t> level = whole_number(text_of(*fields.element[13], "XREAD"));
  if (!limit || !level || *level > 2) return nullptr;
  auto job = std::make_shared<held_job>();
  job->number = number;
  job->id = core_.options.queue + "/" + number;
  job->attempt = *n;
  job->task = text_of(*fields.element[5], "XREAD");
  job->key = text_of(*fields.element[7], "XREAD");
  job->limit = std::chrono::milliseconds(static_cast<std::int64_t>(*limit));
  job->entry = text_of(*fields.element[11], "XREAD");
  job->level = static_cast<int>(*level);
  job->payload = text_of(*fields.element[15], "XREAD");
  return job;
}

std::vector<std::shared_ptr<held_job>> dispatcher::take_given(std::vector<given_item>& items) {
  // Items not carried are {number, attempt} (a payload too long to copy, functions.lua: give):
  // their hashes are read in one round trip.
  std::vector<command> batch;
  for (const given_item& item : items) {
    if (item.carried) continue;
    command c{"HMGET", job_prefix_ + item.number};
    for (const char* field :
         {"state", "attempt", "owner", "task", "payload", "key", "limit", "entry", "level"}) {
      c.add(field);
    }
    batch.push_back(std::move(c));
  }
  std::vector<reply_handle> replies;
  if (!batch.empty()) replies = link_.round_trip(batch, effect::reads);
  std::vector<std::shared_ptr<held_job>> jobs;
  std::size_t read = 0;
  for (given_item& item : items) {
    if (item.carried) {
      jobs.push_back(std::move(item.carried));
      continue;
    }
    const redisReply& f = array_of(*replies[read++], 9, "HMGET");
    // Started for this worker, but it may have been cancelled or taken over since (or the
    // entry was not written by spool_submit): a job that no longer holds this attempt for this
    // worker is not run, and its entry is no longer pending here either.
    const std::optional<std::uint64_t> number = whole_number(item.attempt);
    if (!number || !whole_number(item.number) || text_of(*f.element[0], "HMGET") != "running" ||
        text_of(*f.element[1], "HMGET") != item.attempt ||
        text_of(*f.element[2], "HMGET") != core_.name) {
      continue;
    }
    auto job = std::make_shared<held_job>();
    job->number = item.number;
    job->id = core_.options.queue + "/" + job->number;
    job->attempt = *number;
    job->task = text_of(*f.element[3], "HMGET");
    job->payload = text_of(*f.element[4], "HMGET");
    job->key = text_of(*f.element[5], "HMGET");
    // Written by spool_submit as whole numbers; anything else reads as spool_claim's 0 and 1.
    job->limit = std::chrono::milliseconds(
        static_cast<std::int64_t>(whole_number(text_of(*f.element[6], "HMGET")).value_or(0)));
    job->entry = text_of(*f.element[7], "HMGET");
    job->level = static_cast<int>(whole_number(text_of(*f.element[8], "HMGET")).value_or(1));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

namespace {

// Owned by a handler's pool task: frees the job's slot when the task is destroyed, after it
// ran or when the pool dropped it unrun.
class slot_guard {
 public:
  explicit slot_guard(worker_core& core) noexcept : core_(&core) {}
  slot_guard(slot_guard&& other) noexcept : core_(std::exchange(other.core_, nullptr)) {}
  slot_guard& operator=(slot_guard&&) = delete;
  ~slot_guard() {
    if (core_ != nullptr) core_->slot_freed();
  }

 private:
  worker_core* core_;
};

}  // namespace

void dispatcher::run_handler(const std::shared_ptr<held_job>& job) {
  if (!job->move(phase::waiting, phase::running)) return;  // handed back or lost meanwhile
  const steady::time_point start = steady::now();
  job->started.store(start.time_since_epoch().count(), std::memory_order_release);
  if (job->limit.count() > 0) core_.limit_started.signal();
  worker_metrics::add(core_.metrics.started);

  outcome o{job, false, {}};
  const auto h = core_.handlers.find(job->task);
  if (h == core_.handlers.end()) {
    o.data = "unknown task '" + job->task + "' (no handler on worker " + core_.name + ")";
  } else {
    job_context context;
    context.queue = core_.options.queue;
    context.id = job->id;
    context.task = job->task;
    context.key = job->key;
    context.attempt = job->attempt;
    context.token = job->group->token();
    try {
      o.data = h->second(context, job->payload);
      o.ok = true;
      if (o.data.size() > core_.options.max_result) {
        o.ok = false;
        o.data = "result of " + std::to_string(o.data.size()) + " bytes: the limit is " +
                 std::to_string(core_.options.max_result);
      }
    } catch (const std::exception& e) {
      o.data = e.what();
    } catch (...) {
      o.data = "unknown exception";
    }
  }
  core_.metrics.handler_ran(steady::now() - start);
  if (job->move(phase::running, phase::reporting)) report_.push(std::move(o));
}

void dispatcher::dispatch(std::vector<std::shared_ptr<held_job>>& jobs) {
  std::vector<std::shared_ptr<held_job>> refused;
  for (std::shared_ptr<held_job>& job : jobs) {
    if (std::shared_ptr<held_job> earlier = core_.held.add(job)) {
      // Redis gave this worker a job it still runs under an earlier record (a failover lost
      // the claim): that earlier run no longer holds the job.
      if (earlier->lose() != phase::lost) {
        earlier->fire_token();
        worker_metrics::add(core_.metrics.lost);
      }
    }
    std::error_code refusal;
    try {
      // The group runs no task: it only gives the handler its token (and cancel() fires it),
      // so destroying it, from whichever thread drops the job last, never waits.
      job->group = std::make_unique<spool::task_group>(pool_);
      core_.slot_taken();
      refusal = pool_.try_post([this, job, slot = slot_guard(core_)] { run_handler(job); });
    } catch (const std::exception&) {
      refusal = spool::errc::no_memory;
    }
    if (refusal) {
      // The pool refused the task (shut down, out of memory): the job goes back for another
      // worker; a pool that is shut down takes nothing more, so the worker stops.
      core_.log("the pool refused a job (" + refusal.message() + "): handing it back");
      job->move(phase::waiting, phase::handing_back);
      refused.push_back(job);
      if (refusal == spool::errc::shut_down) core_.request_stop();
    }
  }
  if (!refused.empty()) hand_back(refused, steady::now() + core_.options.lease);
}

dispatcher::woken dispatcher::wait_for_work(std::chrono::milliseconds wait, bool listed,
                                            inbox_entries& found) {
  reply_handle r;
  if (listed) {
    // Jobs started for this worker and its wake-up tokens both come through its inbox.
    command read{"XREAD", "COUNT", std::to_string(max_taken), "BLOCK"};
    read.add(std::to_string(wait.count())).add("STREAMS").add(inbox_key_).add(inbox_read_);
    r = link_.call_blocking(read, wait, core_.stop_requested.fd());
    if (r == nullptr) return woken::stop;
    if (r->type == REDIS_REPLY_NIL) return woken::timeout;
    const redisReply& streams = array_of(*r, 1, "XREAD");
    const redisReply& stream = array_of(*streams.element[0], 2, "XREAD");
    const redisReply& entries = array_of(*stream.element[1], 0, "XREAD");
    for (std::size_t i = 0; i < entries.elements; ++i) {
      const redisReply& entry = array_of(*entries.element[i], 2, "XREAD");
      found.last = text_of(*entry.element[0], "XREAD");
      const redisReply& fields = array_of(*entry.element[1], 0, "XREAD");
      given_item item;
      bool token = false;
      for (std::size_t f = 0; f + 1 < fields.elements; f += 2) {
        const std::string name = text_of(*fields.element[f], "XREAD");
        if (name == "job") item.number = text_of(*fields.element[f + 1], "XREAD");
        if (name == "attempt") item.attempt = text_of(*fields.element[f + 1], "XREAD");
        if (name == "wake") token = true;
      }
      if (token) {
        found.token = true;
      } else {
        item.carried = carried_job(item.number, item.attempt, fields);
        found.items.push_back(std::move(item));
      }
    }
    return found.items.empty() ? woken::token : woken::given;
  }
  // BLPOP takes its timeout in seconds.
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%lld.%03lld", static_cast<long long>(wait.count() / 1000),
                static_cast<long long>(wait.count() % 1000));
  const command pop{"BLPOP", ready_key_, seconds};
  r = link_.call_blocking(pop, wait, core_.stop_requested.fd());
  if (r == nullptr) return woken::stop;
  if (r->type == REDIS_REPLY_NIL) return woken::timeout;
  array_of(*r, 2, "BLPOP");
  return woken::token;
}

void dispatcher::reconcile(bool leaving) {
  command c = fcall("spool_reconcile", core_.options.queue);
  c.add(core_.name).add(leaving ? "1" : "0");
  for (const std::string& n : core_.held.numbers()) c.add(n);
  const reply_handle r = link_.call(c, effect::writes);
  inbox_read_ = "0-0";  // the inbox is deleted
  const std::int64_t released = integer_of(*r, "spool_reconcile");
  if (released > 0) {
    worker_metrics::add(core_.metrics.handed_back, static_cast<std::uint64_t>(released));
    core_.log("handed back " + std::to_string(released) +
              " job(s) claimed by a round trip whose reply was lost");
  }
}

void dispatcher::claim_loop() {
  const auto check_every = core_.options.check_interval;
  auto next_check = steady::now();
  auto next_due = steady::time_point::max();
  // Jobs that submissions may still start for this worker (its listing's room): while there
  // are some, a job taken from the inbox needs no claim after it; at 0 the worker claims, which
  // lists it again with the room it has then.
  unsigned listed = 0;
  auto pause = 50ms;
  while (!core_.stopping()) {
    try {
      if (reconcile_needed_) {
        listed = 0;
        reconcile(false);
        reconcile_needed_ = false;
      }
      const unsigned room = core_.room();
      if (room == 0) {
        // Whatever the inbox holds waits for the next claim, which takes it first.
        listed = 0;
        wait_either(core_.stop_requested, core_.room_freed, check_every);
        continue;
      }
      if (listed == 0 || steady::now() >= next_check) {
        const bool check = steady::now() >= next_check;
        claim_answer answer = claim(room, check);
        if (check) next_check = steady::now() + check_every;
        next_due = answer.next_due_ms >= 0
                       ? steady::now() + std::chrono::milliseconds(answer.next_due_ms)
                       : steady::time_point::max();
        listed = answer.listed;
        const bool filled = answer.jobs.size() >= room && !answer.paused;
        dispatch(answer.jobs);
        pause = 50ms;
        // Not idle: the claim stopped before the streams' ends (functions.lua, spool_claim).
        if (filled || !answer.idle) continue;
      }
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(
          std::min(next_check, next_due) - steady::now());
      if (wait.count() <= 0) {
        listed = 0;
        continue;
      }
      inbox_entries found;
      switch (wait_for_work(wait, listed > 0, found)) {
        case woken::stop:
          return;
        case woken::given: {
          // Unless the hashes it needs are read, inbox_read_ stays: the next claim returns
          // the items.
          std::vector<std::shared_ptr<held_job>> given = take_given(found.items);
          inbox_read_ = found.last;
          worker_metrics::add(core_.metrics.given, given.size());
          dispatch(given);
          listed -= static_cast<unsigned>(std::min<std::size_t>(found.items.size(), listed));
          if (found.token) listed = 0;  // a job waits in a stream: claim it
          break;
        }
        case woken::token:  // the claim skips the tokens it finds after inbox_read_
        case woken::timeout:
          listed = 0;
          break;
      }
    } catch (const error& e) {
      listed = 0;
      if (e.value() == errc::outcome_unknown) reconcile_needed_ = true;
      worker_metrics::add(core_.metrics.redis_errors);
      core_.log(std::string("claiming: ") + e.what());
      if (wait_either(core_.stop_requested, core_.room_freed, pause) == 1) return;
      pause = std::min<std::chrono::milliseconds>(pause * 2, 1000ms);
    }
  }
}

void dispatcher::hand_back(const std::vector<std::shared_ptr<held_job>>& jobs,
                           steady::time_point deadline) {
  if (jobs.empty()) return;
  command c = fcall("spool_release", core_.options.queue);
  c.add(core_.name).add(static_cast<std::uint64_t>(jobs.size()));
  for (const std::shared_ptr<held_job>& job : jobs) c.add(job->number).add(job->attempt);
  auto pause = 20ms;
  while (true) {
    try {
      const reply_handle r = link_.call(c, effect::writes);
      const redisReply& codes = array_of(*r, jobs.size(), "spool_release");
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (integer_of(*codes.element[i], "spool_release") == 1) {
          worker_metrics::add(core_.metrics.handed_back);
        }
        core_.held.remove(*jobs[i]);
      }
      return;
    } catch (const error& e) {
      worker_metrics::add(core_.metrics.redis_errors);
      if (steady::now() + pause > deadline) {
        core_.log(std::string("handing back jobs: ") + e.what() +
                  "; giving up (their leases will expire and other workers take them over)");
        return;
      }
      core_.log(std::string("handing back jobs: ") + e.what() + " (retrying)");
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::milliseconds>(pause * 2, 1000ms);
    }
  }
}

void dispatcher::drain() {
  const steady::time_point begun = steady::now();
  // How long a hand-back or the last outcomes may take to reach Redis once the handlers are
  // done with: a few round trips, or a reconnection.
  const auto settle = std::max<std::chrono::milliseconds>(
      core_.options.connection.connect_timeout + core_.options.connection.command_timeout * 2,
      1000ms);

  // 0. No more jobs given to this worker: it leaves the idle list, and what its inbox holds
  // goes back (reconcile hands back every job Redis says it holds and it does not know of).
  try {
    reconcile(false);
  } catch (const error& e) {
    core_.log(std::string("leaving the idle list: ") + e.what());
  }

  // 1. Jobs claimed but not started: back at once.
  std::vector<std::shared_ptr<held_job>> waiting;
  for (const auto& job : core_.held.snapshot()) {
    if (job->move(phase::waiting, phase::handing_back)) {
      job->fire_token();
      waiting.push_back(job);
    }
  }
  hand_back(waiting, begun + settle);

  // 2. Running handlers: up to drain_timeout to finish.
  const steady::time_point drain_end = begun + core_.options.drain_timeout;
  while (core_.busy.load(std::memory_order_acquire) > 0 && steady::now() < drain_end) {
    core_.room_freed.wait(std::chrono::ceil<std::chrono::milliseconds>(drain_end - steady::now()));
  }

  // 3. Those still running: their tokens fire and their jobs go back.
  std::vector<std::shared_ptr<held_job>> running;
  for (const auto& job : core_.held.snapshot()) {
    if (job->move(phase::running, phase::handing_back)) {
      job->fire_token();
      running.push_back(job);
    }
  }
  if (!running.empty()) {
    core_.log("handing back " + std::to_string(running.size()) +
              " job(s) still running after the drain timeout");
  }
  hand_back(running, steady::now() + settle);

  // 4. The outcomes of the handlers that finished, recorded.
  if (!report_.wait_empty(steady::now() + settle)) {
    core_.log("some outcomes could not be recorded before stopping; their leases will expire");
  }

  // 5. Whatever Redis says this worker still holds goes back; the consumer leaves the group.
  try {
    reconcile(true);
  } catch (const error& e) {
    core_.log(std::string("leaving the group: ") + e.what());
  }
}

}  // namespace spool::queue::detail
