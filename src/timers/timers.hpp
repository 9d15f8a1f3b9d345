// timers/timers.hpp: delayed and periodic tasks (pool::post_after, post_at, post_every,
// submit_after; spool_post_after). The design note is README.md beside this file.
//
// Owns: the heap of timer nodes ordered by (deadline, insertion), its lock, and the timer
// thread ("<name>-tmr"), started by the first schedule() and joined by stop().
//
// Invariants:
//  - A node is in the heap exactly when its heap_slot is not k_not_queued; both change only
//    under mu_. Whoever takes a node out (the thread when due, stop(), remove()) owns it.
//  - The thread sleeps until the earliest deadline, or without a timeout when the heap is
//    empty; it is notified only when a new node becomes the earliest, the earliest is removed,
//    or stop() is called. So a pool with no timer pending makes no wake-ups at all, and one
//    timer far ahead costs one wake-up, when it is due.
//  - After stop() nothing is queued: schedule() reports errc::shut_down.
//
// Contract with the core: a due node's fire() submits through core::submit_due, which
// never blocks the thread (a full bounded queue is bypassed) and refuses only after close().
// stop() runs before the pool closes (core::shutdown), so the one-shot timers a drain lets
// fire go into an open pool.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "spool/detail/timer.hpp"
#include "spool/spool.hpp"

namespace spool::detail {

class core;

class timers {
 public:
  timers(core& owner, const std::string& name) noexcept : owner_(owner), name_(name) {}
  ~timers();  // stop() must have run
  timers(const timers&) = delete;
  timers& operator=(const timers&) = delete;

  // Queues n; starts the thread on first use. errc::shut_down after stop(), errc::system if
  // the thread cannot start, errc::no_memory if the heap cannot grow.
  std::error_code schedule(timer_node& n) noexcept;
  // Takes n out of the heap if it is there; true means the caller owns it now.
  bool remove(timer_node& n) noexcept;

  // For timer_entry, whose transitions into and out of the heap happen under this lock.
  std::mutex& lock() noexcept { return mu_; }
  std::error_code schedule_locked(timer_node& n) noexcept;
  bool remove_locked(timer_node& n) noexcept;

  // No more timers: every periodic node and every node not due by `cutoff` is discarded (in
  // discard mode, every node), and the thread fires the rest, which stop() waits for (so it
  // waits at most until `cutoff`). Joins the thread. Returns how many nodes it discarded.
  std::size_t stop(std::chrono::steady_clock::time_point cutoff) noexcept;

  std::size_t pending() const noexcept;
  // Whether the thread exists (it does from the first schedule() until stop()).
  bool thread_started() const noexcept;

 private:
  void run() noexcept;  // the thread
  bool earlier(const timer_node* a, const timer_node* b) const noexcept {
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->order < b->order);
  }
  void place(std::size_t i, timer_node* n) noexcept {
    heap_[i] = n;
    n->heap_slot = i;
  }
  void sift_up(std::size_t i) noexcept;
  void sift_down(std::size_t i) noexcept;
  timer_node* take_locked(std::size_t i) noexcept;  // removes heap_[i] and returns it

  core& owner_;
  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable wake_;     // the thread sleeps on this
  std::condition_variable emptied_;  // a draining stop() waits on this
  std::vector<timer_node*> heap_;
  std::uint64_t next_order_ = 0;
  bool closed_ = false;  // stop() began: schedule() refuses
  bool exit_ = false;    // the thread leaves
  std::thread thread_;
};

}  // namespace spool::detail
