// What the worker's parts share: the settings, the handlers, the table of held jobs, the
// counters, the room left in the pool, and the signals between the parts. Each part (the
// dispatcher, the lease keeper, the reporter) owns its thread and its Redis connection; they
// meet only here.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "../redis_target.hpp"
#include "../wakeup.hpp"
#include "held_jobs.hpp"
#include "spool/queue/handler.hpp"
#include "spool/queue/worker.hpp"
#include "worker_metrics.hpp"

namespace spool::queue::detail {

struct worker_core {
  worker_core(std::string_view url, worker_options o);

  worker_options options;
  std::shared_ptr<redis_target> target;
  std::string name;        // the consumer name
  std::string lease_text;  // lease in ms, for spool_claim
  std::string aging_text;
  std::string listed_text;  // how long a claim lists the worker idle (ms; "0": never)
  std::unordered_map<std::string, handler> handlers;  // fixed once started

  held_jobs held;
  worker_metrics metrics;

  // Jobs claimed whose handler has not returned (or been skipped): the pool's room is
  // capacity - busy. The dispatcher claims at most the room.
  unsigned capacity = 1;
  std::atomic<unsigned> busy{0};
  [[nodiscard]] unsigned room() const noexcept {
    const unsigned b = busy.load(std::memory_order_acquire);
    return b >= capacity ? 0 : capacity - b;
  }
  // A handler's pool task is about to run (busy and tasks_in_pool count it).
  void slot_taken() {
    busy.fetch_add(1, std::memory_order_acq_rel);
    std::lock_guard lock(tasks_mu_);
    ++tasks_in_pool_;
  }
  // A handler's pool task has ended (ran, or was dropped unrun): room for one more. The last
  // thing a task does with the worker: once tasks_in_pool_ is 0 under the lock, the worker
  // may be destroyed (wait_for_tasks).
  void slot_freed() noexcept {
    busy.fetch_sub(1, std::memory_order_acq_rel);
    room_freed.signal();
    std::lock_guard lock(tasks_mu_);
    if (--tasks_in_pool_ == 0) tasks_cv_.notify_all();
  }
  // Waits until no handler task of this worker is in the pool.
  void wait_for_tasks() {
    std::unique_lock lock(tasks_mu_);
    tasks_cv_.wait(lock, [this] { return tasks_in_pool_ == 0; });
  }
  wakeup room_freed;
  // A handler with a time limit has started: the lease keeper looks at its deadline.
  wakeup limit_started;
  // Written by request_stop() (possibly from a signal handler); never cleared: once
  // readable, every wait that watches it ends.
  wakeup stop_requested;
  std::atomic<bool> stop_flag{false};
  void request_stop() noexcept {
    stop_flag.store(true, std::memory_order_release);
    stop_requested.signal();
  }
  [[nodiscard]] bool stopping() const noexcept { return stop_flag.load(std::memory_order_acquire); }

  // A line for the operator (options.on_log or stderr); the same message at most once a
  // second.
  void log(const std::string& line);

 private:
  std::mutex tasks_mu_;
  std::condition_variable tasks_cv_;
  unsigned tasks_in_pool_ = 0;
  std::mutex log_mu_;
  std::string last_line_;
  std::chrono::steady_clock::time_point last_at_{};
};

}  // namespace spool::queue::detail
