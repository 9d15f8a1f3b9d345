// worker/worker.hpp: a worker slot, and the roster of slots a pool has created.
//
// Slots are created on demand up to max_threads and live as long as the pool; a retired
// thread's slot (its deque empty, its counters kept) is reused by a later thread. Each part
// keeps its per-worker state here, and only that part touches it: the queues (deque, batch and
// the search's bookkeeping; the deque is private to them, others use push_local, pop_local and
// has_local_work), counting (counters, depth), sleep's deferral (progress_seen) and the
// sizer (thread_slot).
//
// The roster publishes slots by a release store of their count after construction, never
// moves or frees one before the pool dies: thieves, counter sums and the monitor walk
// roster::all() without a lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "elastic/thread_slot.hpp"
#include "queues/stolen_batch.hpp"
#include "queues/ws_deque.hpp"
#include "quiescence/counters.hpp"

namespace spool::detail {

class core;
class queues;

struct worker {
  using clock = std::chrono::steady_clock;

  worker(core& o, unsigned i) : owner(o), index(i), rng(0x9E3779B97F4A7C15ull * (i + 1)) {}
  core& owner;
  const unsigned index;  // also the worker's seat in the parker

  // queues/: this worker's deque, the run of a producer slot's tasks it took (stolen_batch.hpp),
  // and the search's bookkeeping, owner only. The deque is the queues part's (it steals from
  // it and counts it); the parts that queue a task from this worker (submission, fork/join,
  // range tickets) and the sleep part reach it only through the owner's calls below, on the
  // owner's thread. Inline: a worker's submission is one push.
  // Pushes t at the bottom; throws std::bad_alloc if the deque cannot grow.
  void push_local(work_item* t) { deque.push(t); }
  // The newest task pushed here and not yet taken, or null.
  work_item* pop_local() noexcept { return deque.pop(); }
  bool has_local_work() const noexcept { return !deque.empty(); }

 private:
  friend class queues;
  ws_deque deque;

 public:
  stolen_batch batch;
  std::uint64_t rng;  // victim selection
  // Whose stolen batch this worker last took a task from: tried first by the next steal,
  // since a producer's run is served from one batch at a time (queues::steal).
  std::size_t batch_hint = 0;
  // The last steal found no task but met a producer slot with tasks that another worker
  // serves (queues::take_from_slot): the search parks without its spin (worker/loop.cpp).
  bool met_served_slot = false;
  // This worker holds or held the timer watch (timers::watch_from) and has not given it back
  // (worker/loop.cpp): it unwatches before it sleeps any other way or stops.
  bool watches_timers = false;
  std::uint32_t searches = 0;  // find_task calls, to look at low-priority aging now and then
  // worker/loop.cpp, for sleep_control::idle_spin: when this worker last went idle, whether
  // its last idle spell (from going idle to finding work) was short enough for a spin to
  // cover, and the count of tasks it had finished (run or dropped) when it last went idle.
  clock::time_point idle_since;
  bool short_gap = true;
  std::uint64_t finished_at_idle = 0;
  bool high_streak = false;      // the last task taken was high priority
  clock::time_point high_since;  // when that run of high-priority tasks began

  // worker/isolation.hpp: the isolation region this worker is in (spool::isolate): the region
  // of the task it runs, or one an isolate() call on it opened; 0 for none. Owner only. Tasks
  // it submits carry it, and its waits (help_until) run only tasks that carry it.
  region_id isolation = 0;

  // quiescence/: this worker's counts (written by it alone), and the tasks it is running
  // (nested when helping). Others change them only through quiescence's calls (tally,
  // task_begins, task_ends, stole), on this worker's thread.
  counters stats;
  std::atomic<std::uint32_t> depth{0};

  // sleep/: tasks this worker had finished when the timed sleeper last looked.
  std::atomic<std::uint64_t> progress_seen{0};

  // elastic/: the thread in this slot.
  thread_slot thread;
};

class roster {
 public:
  roster(core& owner, unsigned capacity)
      : owner_(owner), capacity_(capacity), slots_(new std::unique_ptr<worker>[capacity]) {}

  // The most slots there may be (config::thread_capacity).
  unsigned capacity() const noexcept { return capacity_; }
  // The slots created so far.
  std::span<const std::unique_ptr<worker>> all() const noexcept {
    return {slots_.get(), created_.load(std::memory_order_acquire)};
  }
  // A new slot, published to all(); null if there is no memory (or no room) for one. Called
  // by one thread at a time (the sizer, under its lock).
  worker* create() noexcept {
    const std::uint32_t n = created_.load(std::memory_order_relaxed);
    if (n == capacity_) return nullptr;
    try {
      slots_[n] = std::make_unique<worker>(owner_, n);
    } catch (...) {
      return nullptr;
    }
    created_.store(n + 1, std::memory_order_release);  // publishes the constructed slot
    return slots_[n].get();
  }

 private:
  core& owner_;
  const unsigned capacity_;
  std::unique_ptr<std::unique_ptr<worker>[]> slots_;
  std::atomic<std::uint32_t> created_{0};
};

// The pool worker running on this thread, if any (worker/loop.cpp).
worker* current_worker() noexcept;

}  // namespace spool::detail
