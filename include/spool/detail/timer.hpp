// spool/detail/timer.hpp: what the timer queue holds, and the delayed tasks built on it.
// Internal: users see spool::timer (spool/timer.hpp) and pool::post_after/submit_after. The
// queue, its thread and the state machine's argument are in src/timers/README.md.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <system_error>
#include <utility>

#include "spool/detail/future_state.hpp"
#include "spool/detail/work_item.hpp"
#include "spool/error.hpp"
#include "spool/priority.hpp"

namespace spool::detail {

// One entry of a pool's timer queue (a heap ordered by deadline, then by insertion). The
// queue's fields are guarded by its lock; whoever takes a node out of the heap (the timer
// thread when it is due, a shutdown that discards it, a cancel that removes it) owns it.
class timer_node {
 public:
  static constexpr std::size_t k_not_queued = ~std::size_t{0};
  using clock = std::chrono::steady_clock;

  clock::time_point deadline{};
  std::uint64_t order = 0;               // insertion number: FIFO among equal deadlines
  std::size_t heap_slot = k_not_queued;  // its index in the heap while queued
  priority prio{};                       // the level its task is submitted at

  // Due: the timer thread took it out of the heap. Submits its task (core::submit_due) or
  // reports why that was refused. Called outside the queue's lock.
  virtual void fire(core& owner) noexcept = 0;
  // A shutdown took it out of the heap before it was due: it will never fire.
  virtual void discard() noexcept = 0;
  // A periodic node: a draining shutdown discards it instead of waiting for it.
  virtual bool periodic() const noexcept { return false; }

 protected:
  timer_node() = default;
  ~timer_node() = default;
};

// The library's side of the queue, for the templates below (src/timers/timers.cpp).
// Queues n (errc::shut_down once the pool's timers are stopped, errc::system if the timer
// thread cannot start); on success the queue owns n until it takes it out again.
std::error_code timer_schedule(core& owner, timer_node& n) noexcept;
// Takes n out of the heap if it is there: true means the caller now owns it. False also if
// the pool is gone (its shutdown took every node out).
bool timer_remove(pool_ref owner, timer_node& n) noexcept;
// timer_schedule from any thread: errc::shut_down if the pool is gone.
std::error_code timer_schedule(pool_ref owner, timer_node& n) noexcept;
class timer_entry;
// timer_entry::cancel from any thread (nothing to do if the pool is gone: it ended the entry).
void timer_cancel(pool_ref owner, timer_entry& e) noexcept;
// Submits a due timer's task from the timer thread: never blocks, never applies the bound;
// refused only once the pool is closed (or for memory). Does not take t on refusal.
std::error_code submit_due(core& owner, work_item* t, priority p) noexcept;

// The deadline `delay` from now, saturated at the clock's end (a delay of nanoseconds::max()
// means never, not an overflow).
inline timer_node::clock::time_point deadline_after(std::chrono::nanoseconds delay) noexcept {
  const auto now = timer_node::clock::now();
  constexpr auto never = timer_node::clock::time_point::max();
  if (delay > never - now) return never;
  return now + delay;
}

// ---- The handle's timer: post_after, post_at, post_every (spool::timer) ----

// The state machine (src/timers/README.md): scheduled -> submitted -> running -> finished,
// periodic timers go from running back to scheduled, and cancel() moves scheduled, submitted
// or (periodic) running to cancelled. A transition out of `scheduled` into the heap or out of
// it happens under the queue's lock; the others are compare-and-swaps. Two references: the
// handle's and the flow's (the heap, the submitted task, the run).
class timer_entry : public timer_node {
 public:
  enum : std::uint32_t { scheduled, submitted, running, cancelled, finished };
  // How the entry ended, for end(): its last run returned, it was stopped before a run it
  // would have made (cancel, a discarding shutdown), or its due task was refused.
  // `unscheduled`: the queue refused it at once, nobody saw it (a C timer's on_cancel is not
  // called: the caller keeps its argument).
  enum class ending : unsigned char { ran, stopped, refused, unscheduled };

  timer_entry(core& owner, std::chrono::nanoseconds period) noexcept
      : owner_(&owner), period_(period) {}

  // Runs the callable once (it may throw: the caller reports it).
  virtual void call() = 0;
  // The entry is done: destroy the callable and tell whoever must know (a C timer's
  // on_cancel, the pool's exception handler for a refusal). Called exactly once.
  virtual void end(ending how, std::error_code why) noexcept = 0;

  void fire(core& owner) noexcept override;
  void discard() noexcept override;
  bool periodic() const noexcept override { return period_.count() != 0; }

  // spool::timer::cancel(): true if it stopped a run that would otherwise have started.
  bool cancel() noexcept;
  bool done() const noexcept {
    const std::uint32_t s = state_.load(std::memory_order_acquire);
    return s == cancelled || s == finished;
  }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // The run, from the worker that took the entry's task (src/timers/timers.cpp).
  outcome run() noexcept;
  // The callable's name (spool::named), for the tracing hooks.
  virtual const char* name() const noexcept { return nullptr; }
  // The pool dropped the entry's task before it ran.
  void dropped() noexcept;

 protected:
  virtual ~timer_entry() = default;
  core& pool_core() const noexcept { return *owner_; }

 private:
  core* owner_;
  const std::chrono::nanoseconds period_;  // 0: one-shot
  std::atomic<std::uint32_t> state_{scheduled};
  std::atomic<std::uint32_t> refs_{2};
};

// A C++ callable behind a timer_entry.
template <class F>
class timer_entry_of final : public timer_entry {
 public:
  template <class G>
  timer_entry_of(core& owner, std::chrono::nanoseconds period, G&& fn)
      : timer_entry(owner, period), name_(name_of(fn)) {
    ::new (static_cast<void*>(&fn_)) F(std::forward<G>(fn));
  }
  ~timer_entry_of() override {}  // fn_ is destroyed by end()
  void call() override { fn_(); }
  const char* name() const noexcept override { return name_.get(); }
  void end(ending how, std::error_code why) noexcept override {
    fn_.~F();
    if (how == ending::refused) {
      report_exception(pool_core(), std::make_exception_ptr(error(static_cast<errc>(why.value()))),
                       thrown_by::timer_refused);
    }
  }

 private:
  union {
    F fn_;
  };
  [[no_unique_address]] name_slot<F> name_;
};

// ---- pool::submit_after: a future's task that waits in the timer queue first ----

// The task and its future's state, as future_task, and also the timer node that submits it
// when due. future::cancel() claims it (state_base::try_claim) and, if it is still in the
// heap, takes it out, so a cancelled delayed task costs the timer thread no wake-up.
template <class F, class R>
class delayed_task final : public state<R>, public timer_node {
 public:
  template <class G>
  delayed_task(pool_ref owner, G&& fn) : state<R>(owner), name_(name_of(fn)) {
    ::new (static_cast<void*>(&fn_)) F(std::forward<G>(fn));
    this->set_flags(state_base::k_bound);
  }
  ~delayed_task() override {}

  outcome run(core&) noexcept override { return this->run_claimed(fn_); }
  void cancel() noexcept override {
    this->drop_unrun(fn_, std::make_exception_ptr(task_cancelled()));
  }
  const char* name() const noexcept override { return name_.get(); }
  // The timer queue refused it, so its future was never handed out: drop both references.
  void destroy() noexcept override {
    fn_.~F();
    this->release();
    this->release();
  }

  void fire(core& owner) noexcept override {
    if (std::error_code why = submit_due(owner, this, prio)) {
      this->drop_unrun(fn_, std::make_exception_ptr(error(static_cast<errc>(why.value()))));
    }
  }
  void discard() noexcept override { cancel(); }

 protected:
  bool cancel_here(cancel_walk&) noexcept override {
    if (!this->cancel_unrun(fn_)) return false;
    // Out of the heap: the task's reference is ours. Otherwise the timer thread or the pool
    // holds the task, and run() or cancel() will find it claimed and drop that reference.
    if (timer_remove(this->owner(), *this)) this->release();
    return true;
  }

 private:
  union {
    F fn_;
  };
  [[no_unique_address]] name_slot<F> name_;
};

}  // namespace spool::detail
