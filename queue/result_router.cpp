#include "result_router.hpp"

#include <cstdio>
#include <map>
#include <random>

#include "names.hpp"
#include "replies.hpp"
#include "spool/queue/error.hpp"

namespace spool::queue::detail {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// How long an outcome nobody has asked for is kept (its submission's reply was lost).
constexpr auto early_keep = 60s;
// The most jobs one spool_peek looks up.
constexpr std::size_t peek_batch = 500;

std::string random_list_name() {
  std::random_device rd;
  char name[64];
  std::snprintf(name, sizeof name, "spool:reply:%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return name;
}

}  // namespace

result_router::result_router(std::shared_ptr<const redis_target> target, connection_options options,
                             spool::pool& pool, durability d, std::chrono::milliseconds recheck)
    : pool_(pool),
      durability_(d),
      recheck_(recheck),
      list_(random_list_name()),
      link_(std::move(target), options) {}

result_router::~result_router() {
  stop_.signal();
  if (thread_.joinable()) thread_.join();
  // waiting_'s promises are destroyed unset: their futures report task_cancelled.
}

spool::future<std::string> result_router::expect(const std::string& job_id) {
  spool::promise<std::string> p(pool_);
  spool::future<std::string> f = p.get_future();
  std::lock_guard lock(mu_);
  if (!started_) {
    started_ = true;
    thread_ = std::thread([this] { run(); });
  }
  if (auto e = early_.find(job_id); e != early_.end()) {
    complete(p, e->second.what);
    early_.erase(e);
    return f;
  }
  const auto now = steady::now();
  waiting& w = waiting_[job_id];
  if (w.promises.empty()) {
    w.since = now;
    w.next_check = now + recheck_;
  }
  w.promises.push_back(std::move(p));
  return f;
}

spool::future<std::string> result_router::completed(const std::string& state,
                                                    const std::string& data) {
  spool::promise<std::string> p(pool_);
  spool::future<std::string> f = p.get_future();
  const char kind = state == "done" ? 'D' : state == "dead" ? 'X' : 'C';
  complete(p, outcome{kind, data});
  return f;
}

void result_router::complete(spool::promise<std::string>& p, const outcome& o) {
  switch (o.kind) {
    case 'D':
      p.set_value(o.data);
      break;
    case 'X':
      p.set_exception(std::make_exception_ptr(job_failed(o.data)));
      break;
    default:
      p.set_exception(std::make_exception_ptr(job_cancelled()));
      break;
  }
}

void result_router::deliver(const std::string& id, const outcome& o) {
  std::vector<spool::promise<std::string>> promises;
  {
    std::lock_guard lock(mu_);
    auto w = waiting_.find(id);
    if (w == waiting_.end()) {
      early_.insert_or_assign(id, early_outcome{o, steady::now()});
      return;
    }
    promises = std::move(w->second.promises);
    waiting_.erase(w);
  }
  for (spool::promise<std::string>& p : promises) complete(p, o);
}

bool result_router::pop_outcomes(std::vector<std::pair<std::string, outcome>>& out) {
  const command pop{"BLMPOP", "1", "1", list_, "LEFT", "COUNT", "1024"};
  const reply_handle r = link_.call_blocking(pop, 1000ms, stop_.fd());
  if (!r) return false;
  if (r->type == REDIS_REPLY_NIL) return true;
  const redisReply& a = array_of(*r, 2, "BLMPOP");
  const redisReply& items = array_of(*a.element[1], 0, "BLMPOP");
  for (std::size_t i = 0; i < items.elements; ++i) {
    const std::string item = text_of(*items.element[i], "BLMPOP");
    const std::size_t newline = item.find('\n');
    if (item.size() < 2 || newline == std::string::npos) continue;  // not ours: skip
    out.emplace_back(item.substr(1, newline - 1), outcome{item[0], item.substr(newline + 1)});
  }
  return true;
}

bool result_router::replicas_confirm() {
  if (durability_.replicas == 0) return true;
  const command wait{"WAIT", std::to_string(durability_.replicas),
                     std::to_string(durability_.replica_timeout.count())};
  const reply_handle r = link_.call(wait, effect::reads);
  return integer_of(*r, "WAIT") >= static_cast<std::int64_t>(durability_.replicas);
}

void result_router::recheck(steady::time_point now) {
  // The jobs due for a look, by queue.
  std::map<std::string, std::vector<std::string>> due;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, w] : waiting_) {
      if (w.next_check > now) continue;
      w.next_check = now + recheck_;
      const job_ref ref = parse_job_id(id);
      due[ref.queue].push_back(ref.number);
    }
    for (auto e = early_.begin(); e != early_.end();) {
      e = now - e->second.arrived > early_keep ? early_.erase(e) : std::next(e);
    }
  }
  for (auto& [queue, numbers] : due) {
    for (std::size_t from = 0; from < numbers.size(); from += peek_batch) {
      const std::size_t to = std::min(numbers.size(), from + peek_batch);
      command peek = fcall("spool_peek", queue);
      for (std::size_t i = from; i < to; ++i) peek.add(numbers[i]);
      const reply_handle r = link_.call(peek, effect::reads);
      const redisReply& a = array_of(*r, to - from, "spool_peek");
      std::vector<std::pair<std::string, outcome>> found;
      for (std::size_t i = 0; i < a.elements; ++i) {
        const redisReply& one = array_of(*a.element[i], 2, "spool_peek");
        const std::string state = text_of(*one.element[0], "spool_peek");
        const std::string data = text_of(*one.element[1], "spool_peek");
        const std::string id = queue + "/" + numbers[from + i];
        if (state == "done") found.emplace_back(id, outcome{'D', data});
        if (state == "dead") found.emplace_back(id, outcome{'X', data});
        if (state == "cancelled") found.emplace_back(id, outcome{'C', data});
        if (state.empty()) {
          found.emplace_back(id, outcome{'X', "job " + id + " no longer exists in Redis"});
        }
      }
      if (!found.empty() && !replicas_confirm()) continue;  // looked up again next time
      for (const auto& [id, o] : found) deliver(id, o);
    }
  }
}

void result_router::run() {
  auto pause = 50ms;
  auto next_recheck = steady::now() + recheck_;
  while (true) {
    try {
      std::vector<std::pair<std::string, outcome>> popped;
      if (!pop_outcomes(popped)) return;  // asked to stop
      if (!popped.empty() && !replicas_confirm()) {
        // Not confirmed by the replicas in time: these outcomes may yet be undone by a
        // failover. Their jobs stay waiting and are looked up again (recheck).
        std::lock_guard lock(mu_);
        for (const auto& [id, o] : popped) {
          if (auto w = waiting_.find(id); w != waiting_.end()) w->second.next_check = {};
        }
        popped.clear();
      }
      for (const auto& [id, o] : popped) deliver(id, o);
      const auto now = steady::now();
      if (now >= next_recheck) {
        recheck(now);
        next_recheck = now + std::min<std::chrono::milliseconds>(recheck_, 1000ms);
      }
      pause = 50ms;
    } catch (const error&) {
      // Redis is down, or moved: look everything up once it is back (pushes may be lost).
      {
        std::lock_guard lock(mu_);
        for (auto& [id, w] : waiting_) w.next_check = {};
      }
      if (stop_.wait(pause)) return;
      pause = std::min<std::chrono::milliseconds>(pause * 2, 1000ms);
    }
  }
}

}  // namespace spool::queue::detail
