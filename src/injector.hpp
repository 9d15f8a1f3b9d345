// injector.hpp: the bounded FIFO through which threads outside the pool hand it work (the
// paper's producer-consumer queue). Producers that find it full wait, time out, or are told so,
// by policy; workers never wait on it (they sleep in the parker), so the only condition
// variable here is "not full", for producers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

#include "spool/detail/task.hpp"
#include "spool/error.hpp"
#include "spool/spool.hpp"

namespace spool::detail {

class injector {
 public:
  injector(std::size_t capacity, full_policy policy, std::chrono::nanoseconds timeout) noexcept
      : capacity_(capacity), policy_(policy), timeout_(timeout) {}
  ~injector();  // cancels anything left (only possible if the pool never ran it)

  struct push_result {
    std::error_code error;  // empty on success
    task* evicted;          // discard_oldest: the task pushed out, for the caller to cancel
  };
  // Enqueues t or reports why not (errc::full also for caller_runs: the caller runs it).
  // Never takes ownership of t on failure.
  push_result push(task* t) noexcept;

  task* pop() noexcept;

  // Refuses every later push and wakes blocked producers with errc::shut_down.
  void close() noexcept;
  bool closed() const noexcept;

  std::size_t size() const noexcept { return size_.load(std::memory_order_seq_cst); }
  bool empty() const noexcept { return size() == 0; }

 private:
  bool full_locked() const noexcept { return capacity_ != 0 && count_ >= capacity_; }
  void append_locked(task* t) noexcept;
  task* take_locked() noexcept;

  const std::size_t capacity_;
  const full_policy policy_;
  const std::chrono::nanoseconds timeout_;

  mutable std::mutex mu_;
  std::condition_variable not_full_;
  task* head_ = nullptr;
  task* tail_ = nullptr;
  std::size_t count_ = 0;          // guarded by mu_
  std::size_t blocked_ = 0;        // producers waiting on not_full_, guarded by mu_
  bool closed_ = false;            // guarded by mu_
  std::atomic<std::size_t> size_{0};  // count_, readable without the lock
};

}  // namespace spool::detail
