#include "reporter.hpp"

#include <cstdio>
#include <random>

#include "../replies.hpp"

namespace spool::queue::detail {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t batch_limit = 256;

// The retry's jitter, drawn here (Redis's own random numbers are not meant for this).
std::string jitter() {
  thread_local std::minstd_rand rng{std::random_device{}()};
  char text[16];
  std::snprintf(text, sizeof text, "%.4f", std::uniform_real_distribution<double>(0, 1)(rng));
  return text;
}

}  // namespace

reporter::reporter(worker_core& core) : core_(core), link_(core.target, core.options.connection) {}

reporter::~reporter() { finish(); }

void reporter::start() {
  thread_ = std::thread([this] { run(); });
}

void reporter::push(outcome o) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(o));
    if (last_push_ != std::chrono::steady_clock::time_point{}) {
      gap_ = next_mean_gap(gap_, now - last_push_);
    }
    last_push_ = now;
  }
  cv_.notify_all();
}

bool reporter::wait_empty(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [this] { return queue_.empty() && in_progress_ == 0; });
}

void reporter::finish() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void reporter::record(std::deque<outcome>& batch) {
  command finish = fcall("spool_finish", core_.options.queue);
  finish.add(core_.name).add(static_cast<std::uint64_t>(batch.size()));
  for (const outcome& o : batch) {
    finish.add(o.job->number).add(o.job->attempt).add(o.ok ? "ok" : "error").add(o.data);
    finish.add(jitter());
  }
  const reply_handle r = link_.call(finish, effect::writes);
  const redisReply& codes = array_of(*r, batch.size(), "spool_finish");
  worker_metrics& m = core_.metrics;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::string code = text_of(*codes.element[i], "spool_finish");
    if (code == "done" || code == "dup") {
      worker_metrics::add(m.done);
    } else if (code == "retry") {
      worker_metrics::add(m.failed);
      worker_metrics::add(m.retried);
    } else if (code == "dead") {
      worker_metrics::add(m.failed);
      worker_metrics::add(m.dead);
    } else if (code == "cancelled") {
      worker_metrics::add(m.cancelled);
    } else {
      worker_metrics::add(m.stale);
    }
    core_.held.remove(*batch[i].job);
  }
}

void reporter::run() {
  auto pause = 20ms;
  std::deque<outcome> batch;
  bool holding = false;
  while (true) {
    {
      std::unique_lock lock(mu_);
      in_progress_ = 0;
      cv_.notify_all();
      cv_.wait(lock, [this] { return done_ || !queue_.empty(); });
      if (done_) return;
      if (hold_outcomes(holding, gap_)) {
        cv_.wait_for(lock, outcome_hold, [this] { return done_ || queue_.size() >= batch_limit; });
        if (done_) return;
      }
      holding = queue_.size() > 1;  // outcomes came faster than the last call returned
      while (!queue_.empty() && batch.size() < batch_limit) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      in_progress_ = batch.size();
    }
    while (!batch.empty()) {
      try {
        record(batch);
        batch.clear();
        pause = 20ms;
      } catch (const error& e) {
        worker_metrics::add(core_.metrics.redis_errors);
        core_.log(std::string("recording outcomes: ") + e.what() + " (retrying)");
        std::unique_lock lock(mu_);
        if (cv_.wait_for(lock, pause, [this] { return done_; })) return;
        pause = std::min<std::chrono::milliseconds>(pause * 2, 1000ms);
      }
    }
  }
}

}  // namespace spool::queue::detail
