// timers/timers.hpp: delayed and periodic tasks (pool::post_after, post_at, post_every,
// submit_after; spool_post_after). The design note is README.md beside this file.
//
// Owns: the heap of timer nodes ordered by (deadline, insertion), its lock, and the timer
// thread ("<name>-tmr"), started by the first schedule() and joined by stop().
//
// Invariants:
//  - A node is in the heap exactly when its heap_slot is not k_not_queued; both change only
//    under mu_. Whoever takes a node out (the thread or a worker when due, stop(), remove())
//    owns it.
//  - The thread sleeps until the earliest deadline, or without a timeout when the heap is
//    empty; it is notified only when a new node becomes the earliest, the earliest is removed
//    while the thread serves it, the watch changes hands, or stop() is called. So a pool with no
//    timer pending makes no wake-ups at all, and one timer far ahead costs the thread one wake-up,
//    when it is due.
//  - While a worker watches (README.md, "A worker watches the earliest deadline"), nodes due
//    by watched_at_ are the watcher's and the thread waits k_backstop past the earliest of
//    them; it serves a node due earlier itself. A node still in the heap k_backstop past its
//    deadline takes the watch back to the thread, and no worker watches until
//    watch_resumes_ (a pause; k_pause_min).
//  - After stop() nothing is queued: schedule() reports errc::shut_down.
//
// Contract with the core: a due node's fire() submits through core::submit_due, which
// never blocks the thread (a full bounded queue is bypassed) and refuses only after close().
// stop() runs before the pool closes (core::shutdown), so the one-shot timers a drain lets
// fire go into an open pool.
#pragma once

#include <algorithm>
#include <atomic>
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
struct core_testing;

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

  // ---- A worker watches the earliest deadline (README.md, "A worker watches") ----
  // Whether a timer may be pending: a hint read without the lock, for a worker about to park.
  bool maybe_pending() const noexcept { return any_.load(std::memory_order_relaxed); }
  enum class watch : unsigned char { none, watching, due };
  // The last look of worker `seat`, listed as a sleeper: `due` if the earliest node is due
  // (the caller withdraws and calls fire_watched), `watching` if it now holds the watch
  // (*deadline: the earliest deadline, where it parks until), `none` if nothing is pending or
  // another worker watches.
  watch watch_from(std::uint32_t seat, std::chrono::steady_clock::time_point* deadline) noexcept;
  // Takes every node due now out of the heap and fires it, on the calling worker (`seat`).
  // If it held the watch it keeps it while it runs what it fired (the thread backs it up).
  // The caller counts as a spinner while it fires, so the tasks wake nobody else.
  void fire_watched(std::uint32_t seat) noexcept;
  // Worker `seat`, the watcher, was woken before its deadline (for other work): it keeps the
  // watch, awake, and the thread backs it up. Does nothing if it no longer holds the watch.
  void watcher_woke(std::uint32_t seat) noexcept;
  // Worker `seat` stops watching (it may no longer park with a deadline of its own, or it
  // stops); the thread takes over. Does nothing if it did not hold the watch.
  void unwatch(std::uint32_t seat) noexcept;
  // How long a due node waits for a watcher busy with a task before the thread takes the
  // watch back and fires it.
  static constexpr std::chrono::microseconds k_backstop{1000};
  // After such a takeover no worker watches for a while: the thread serves every deadline, so
  // tasks that outlast the gaps between deadlines (each would keep its watcher past the next
  // one) do not make every other timer k_backstop late. The first pause is k_pause_min; a
  // takeover within k_pause_reset of the last pause's end doubles it, up to k_pause_max.
  static constexpr std::chrono::milliseconds k_pause_min{10};
  static constexpr std::chrono::milliseconds k_pause_max{2000};
  static constexpr std::chrono::milliseconds k_pause_reset{1000};
  // The pause that a takeover at `now` starts, after a pause of `last` that ended (or ends) at
  // `last_end`.
  static std::chrono::steady_clock::duration next_pause(
      std::chrono::steady_clock::duration last, std::chrono::steady_clock::time_point last_end,
      std::chrono::steady_clock::time_point now) noexcept {
    if (now - last_end >= k_pause_reset) return k_pause_min;
    return std::clamp<std::chrono::steady_clock::duration>(2 * last, k_pause_min, k_pause_max);
  }

  std::size_t pending() const noexcept;
  // Whether the thread exists (it does from the first schedule() until stop()).
  bool thread_started() const noexcept;

 private:
  friend struct core_testing;
  void run() noexcept;  // the thread
  // How the thread waits, so that the watcher's moves notify it only when its wait must change.
  enum class thread_wait : unsigned char { running, untimed, serving, backstop };
  // Notifies the thread (a state change that alters its wait); it counts as running until it
  // looks again, so one change notifies it once.
  void notify_thread_locked() noexcept {
    thread_wait_ = thread_wait::running;
    wake_.notify_one();
  }
  void size_changed_locked() noexcept { any_.store(!heap_.empty(), std::memory_order_relaxed); }
  void drop_watch_locked() noexcept {
    watcher_ = k_no_watcher;
    watcher_parked_ = false;
  }
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
  // The watch: the worker that serves the deadline watched_at_ (the earliest when it parked)
  // by parking until it, or k_no_watcher; watcher_parked_ says whether it is in that park
  // or awake (running what it fired or work it was woken for, until it parks again).
  static constexpr std::uint32_t k_no_watcher = ~std::uint32_t{0};
  std::uint32_t watcher_ = k_no_watcher;
  bool watcher_parked_ = false;
  timer_node::clock::time_point watched_at_{};
  // No worker takes the watch before watch_resumes_ (set by a takeover, with the pause's
  // length in watch_pause_).
  timer_node::clock::time_point watch_resumes_{};
  timer_node::clock::duration watch_pause_{};
  thread_wait thread_wait_ = thread_wait::running;
  std::size_t firing_ = 0;        // fire_watched calls between taking nodes out and firing them
  std::atomic<bool> any_{false};  // !heap_.empty(), stored under mu_
  std::thread thread_;
};

}  // namespace spool::detail
