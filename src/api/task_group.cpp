// api/task_group.cpp: counting a group's tasks, waiting for them, cancelling them.
//
// The count. Everything a waiter needs is in one 64-bit word, count_, changed only by
// read-modify-writes:
//
//   bits  0-31  pending: units outstanding. One per task from run() until it has finished
//               (ran, threw, skipped or dropped), one per run() still deciding whether the pool
//               accepts, and one per nested group while that group has units of its own.
//   bits 32-43  finishers: threads that took pending to zero and are still reporting the drain
//               (at most one per thread).
//   bit  44     ran: a task finished since the count was last zero (a drain worth reporting).
//   bits 45-63  generation: drains completed, bumped in the same read-modify-write that makes
//               pending and finishers both zero.
//
// A unit is added before the task becomes visible and removed after the task's last touch of
// its callable. The thread whose removal takes pending to zero becomes a finisher in that same
// step: it calls on_finished (serialised by report_mu_), then removes itself; if that leaves
// nothing pending and no finisher, the same step bumps the generation, and the thread then
// wakes the waiters and gives back the unit its drain held in the parent group. That removal
// is usually a task finishing; it can also be a run() withdrawing a refused submission or a
// spare parent unit (see nesting); the drain is reported only if the ran bit says a task
// finished since the count was last zero, so a refusal into an idle group reports nothing.
//
// Invariants, and what they buy:
//  1. pending == 0 implies every task accepted into the group (or a nested one) so far has
//     finished: units are counted before the task is visible and never dropped early.
//  2. A nested group with pending > 0 holds one unit in its parent. A child's run() that finds
//     the child idle enters the parent first and only then moves the child from 0 to 1 with a
//     compare-and-swap (giving the spare parent unit back if another thread got there first);
//     the child's finisher gives the unit back only after the child's own drain completed. So
//     parent.wait() cannot return while a child task run before it is pending, and a parent
//     drains after its children.
//  3. The generation moves only in a step that leaves the word drained (nothing pending, no
//     finisher). A waiter is done when it sees the word drained or its generation moved since
//     the wait began; both come from one load. So a waiter never misses a drain that a new
//     batch followed at once, and every on_finished call for that drain has already returned
//     (a callback runs while its finisher still shows in the word): the owner may destroy the
//     group as soon as wait() returns.
//  4. The state outlives every touch. A finisher takes a reference (shared_from_this) in its
//     first step, while the word is busy and so the owner is still waiting, and drops it after
//     its last touch; other tasks touch the state only up to their read-modify-write, while
//     the word is busy.
// Cancellation is a flag per group, looked up through the parents (so it reaches downwards);
// a failure is recorded in the group and in every ancestor (first exception wins in each).
//
// Waking, and why no wake-up is lost. Outside threads sleep on the futex epoch; a worker that
// waits sleeps in the pool's parker (help_until). Each waiter announces itself (a
// read-modify-write of outside_waiters or worker_waiters), then reads the count; the drain
// step (a read-modify-write of the count) is followed by the finisher's reads of both waiter
// counters. All seq_cst, so (Dekker) either the waiter's read sees the drain, or the finisher
// sees the waiter and wakes it. An outside waiter reads epoch before the count and sleeps only
// while epoch is unchanged; the finisher bumps epoch before futex_wake, so a wake cannot fall
// between the check and the sleep. A worker relies on the parker's announcement and
// core::wake_waiting_workers() pairing the same way (see worker/wait_target.hpp): its nap
// announces it before arm(), in the last look.
#include "spool/task_group.hpp"

#include <atomic>
#include <climits>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>

#include "core.hpp"
#include "sleep/futex.hpp"

namespace spool::detail {
namespace {

constexpr std::uint64_t k_pending = 1;
constexpr std::uint64_t k_pending_mask = 0xFFFF'FFFFull;
constexpr std::uint64_t k_finisher = 1ull << 32;
constexpr std::uint64_t k_finisher_mask = 0xFFFull << 32;
constexpr std::uint64_t k_ran = 1ull << 44;
constexpr std::uint64_t k_generation = 1ull << 45;
constexpr std::uint64_t k_busy_mask = k_pending_mask | k_finisher_mask;

constexpr std::uint64_t generation_of(std::uint64_t word) noexcept { return word >> 45; }

}  // namespace

class group_state : public std::enable_shared_from_this<group_state> {
 public:
  group_state(core& owner, std::shared_ptr<group_state> parent) noexcept
      : owner_(owner), parent_(std::move(parent)) {}

  core& owner() const noexcept { return owner_; }

  // Adds a unit; the first unit of a nested group's drain is counted in the parent first.
  void enter() noexcept {
    if (parent_ == nullptr) {
      count_.fetch_add(k_pending, std::memory_order_seq_cst);
      return;
    }
    std::uint64_t word = count_.load(std::memory_order_relaxed);
    for (;;) {
      if ((word & k_pending_mask) != 0) {
        if (count_.compare_exchange_weak(word, word + k_pending, std::memory_order_seq_cst,
                                         std::memory_order_relaxed)) {
          return;
        }
        continue;
      }
      parent_->enter();
      if (count_.compare_exchange_strong(word, word + k_pending, std::memory_order_seq_cst,
                                         std::memory_order_relaxed)) {
        return;  // this drain's unit stays in the parent until our finisher gives it back
      }
      parent_->leave(false);  // someone else started the drain (or the word moved): retry
    }
  }

  // Removes a unit; `ran`: a task finished (rather than a submission being withdrawn).
  void leave(bool ran) noexcept {
    std::uint64_t word = count_.load(std::memory_order_relaxed);
    for (;;) {
      const bool last = (word & k_pending_mask) == k_pending;
      std::uint64_t next = word - k_pending;
      if (last) {
        next = (next + k_finisher) & ~k_ran;
      } else if (ran) {
        next |= k_ran;
      }
      if (count_.compare_exchange_weak(word, next, std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
        if (last) finish(ran || (word & k_ran) != 0);
        return;
      }
    }
  }

  // The word as a waiter reads it; drained_since() on it decides whether the wait is over.
  std::uint64_t snapshot() const noexcept { return count_.load(std::memory_order_seq_cst); }
  static bool drained_since(std::uint64_t word, std::uint64_t generation) noexcept {
    return (word & k_busy_mask) == 0 || generation_of(word) != generation;
  }

  bool cancelled() const noexcept {
    for (const group_state* g = this; g != nullptr; g = g->parent_.get()) {
      if (g->cancelled_.load(std::memory_order_acquire)) return true;
    }
    return false;
  }
  void cancel() noexcept {
    cancelled_.store(true, std::memory_order_release);
    std::lock_guard lock(stop_mu_);
    if (stop_.stop_possible()) stop_.request_stop();
  }

  // The group's std::stop_source, made on first use: stopped by cancel(), and, through a
  // callback on the parent's token, by any ancestor's. cancel() sets the flag before it looks
  // for the source, and this looks at the flag after making it, both under stop_mu_, so a
  // cancellation is never missed.
  std::stop_token stop_token() {
    std::lock_guard lock(stop_mu_);
    if (!stop_.stop_possible()) {
      stop_ = std::stop_source();
      if (parent_ != nullptr) parent_link_.emplace(parent_->stop_token(), stop_link{this});
      if (cancelled()) stop_.request_stop();
    }
    return stop_.get_token();
  }

  void record_failure(const std::exception_ptr& failure) noexcept {
    for (group_state* g = this; g != nullptr; g = g->parent_.get()) {
      std::lock_guard lock(g->failure_mu_);
      if (g->failure_ == nullptr) g->failure_ = failure;
    }
  }

  // The status, and the first exception if `take_failure` and no wait() has taken it yet.
  group_status status(std::exception_ptr* take_failure) noexcept {
    {
      std::lock_guard lock(failure_mu_);
      if (failure_ != nullptr) {
        if (take_failure != nullptr && !failure_taken_) {
          failure_taken_ = true;
          *take_failure = failure_;
        }
        return group_status::failed;
      }
    }
    return cancelled() ? group_status::cancelled : group_status::completed;
  }

  // The owning task_group is being destroyed, drained. Reports the first exception to the
  // pool's handler unless it was delivered otherwise: rethrown by a wait(), passed to an
  // on_finished callback (one is set), or left to a parent whose task_group still lives (the
  // exception was recorded there too, and the parent's wait, callback or destructor reports it).
  void abandon() noexcept {
    abandoned_.store(true, std::memory_order_release);
    if (parent_ != nullptr && !parent_->abandoned_.load(std::memory_order_acquire)) return;
    {
      std::lock_guard lock(report_mu_);
      if (on_finished_) return;
    }
    std::exception_ptr unreported;
    {
      std::lock_guard lock(failure_mu_);
      if (failure_ != nullptr && !failure_taken_) {
        failure_taken_ = true;
        unreported = failure_;
      }
    }
    if (unreported != nullptr) {
      owner_.report_exception(unreported, thrown_by::unwaited_group);
    }
  }

  void set_on_finished(std::function<void(group_status, std::exception_ptr)> callback) {
    std::lock_guard lock(report_mu_);
    on_finished_ = std::move(callback);
  }

  // Waiters announce themselves here before their last look at the count (see the note).
  std::atomic<std::uint32_t> epoch{0};
  std::atomic<std::uint32_t> outside_waiters{0};
  std::atomic<std::uint32_t> worker_waiters{0};

  std::atomic<std::uint64_t> submitted{0};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> skipped{0};  // cancelled() in the API: skipped or dropped

 private:
  // Runs on the thread that took pending to zero; its finisher bit is set in count_.
  void finish(bool report) noexcept {
    // From here to the end this thread may be the last to touch the state: once the word
    // drains, the group's owner may return from wait() and drop its reference.
    const std::shared_ptr<group_state> keep = shared_from_this();
    if (report) report_drain();
    std::uint64_t word = count_.load(std::memory_order_relaxed);
    for (;;) {
      std::uint64_t next = word - k_finisher;
      const bool drained = (next & k_busy_mask) == 0;
      if (drained) next += k_generation;
      if (count_.compare_exchange_weak(word, next, std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
        if (drained) wake_waiters();
        break;
      }
    }
    if (parent_ != nullptr) parent_->leave(report);
  }

  void report_drain() noexcept {
    std::lock_guard lock(report_mu_);
    if (!on_finished_) return;
    std::exception_ptr first;
    {
      std::lock_guard failure_lock(failure_mu_);
      first = failure_;
    }
    const group_status how = status(nullptr);
    try {
      on_finished_(how, std::move(first));
    } catch (...) {
      owner_.report_exception(std::current_exception(), thrown_by::group_callback);
    }
  }

  void wake_waiters() noexcept {
    // After the drain step (seq_cst), so a waiter that announced itself before reading the
    // count is seen here; epoch moves before the futex wake, so a sleeper cannot miss it.
    epoch.fetch_add(1, std::memory_order_seq_cst);
    if (outside_waiters.load(std::memory_order_seq_cst) != 0) futex_wake(epoch, INT_MAX);
    if (worker_waiters.load(std::memory_order_seq_cst) != 0) owner_.wake_waiting_workers();
  }

  struct stop_link {  // the parent's stop reaches this group's source
    group_state* child;
    void operator()() const noexcept { child->stop_.request_stop(); }
  };

  core& owner_;
  const std::shared_ptr<group_state> parent_;
  std::mutex stop_mu_;  // guards making stop_ (see stop_token)
  std::stop_source stop_{std::nostopstate};
  std::optional<std::stop_callback<stop_link>> parent_link_;
  alignas(64) std::atomic<std::uint64_t> count_{0};
  alignas(64) std::atomic<bool> cancelled_{false};
  std::atomic<bool> abandoned_{false};  // the owning task_group has been destroyed

  std::mutex failure_mu_;
  std::exception_ptr failure_;  // the first exception of this group or a nested one
  bool failure_taken_ = false;  // a wait() has rethrown it

  // Serialises on_finished calls and guards on_finished_. Recursive: a callback that runs a task
  // into its own group on a caller_runs pool can finish a drain on its own thread.
  std::recursive_mutex report_mu_;
  std::function<void(group_status, std::exception_ptr)> on_finished_;
};

namespace {

// A group as something a worker helps while waiting for: the generation the wait began in is
// fixed, so done() stays true once it has been true.
class group_target final : public wait_target {
 public:
  group_target(group_state& g, std::uint64_t generation) noexcept
      : g_(g), generation_(generation) {}
  bool done() const noexcept override {
    return group_state::drained_since(g_.snapshot(), generation_);
  }
  bool arm() noexcept override {
    g_.worker_waiters.fetch_add(1, std::memory_order_seq_cst);
    if (!done()) return false;
    g_.worker_waiters.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }
  void disarm() noexcept override { g_.worker_waiters.fetch_sub(1, std::memory_order_relaxed); }

 private:
  group_state& g_;
  const std::uint64_t generation_;
};

bool wait_outside(group_state& g, std::uint64_t generation,
                  const std::chrono::steady_clock::time_point* deadline) noexcept {
  g.owner().outside_sleeps();
  g.outside_waiters.fetch_add(1, std::memory_order_seq_cst);
  bool drained = false;
  for (;;) {
    const std::uint32_t key = g.epoch.load(std::memory_order_seq_cst);
    drained = group_state::drained_since(g.snapshot(), generation);
    if (drained) break;
    if (deadline == nullptr) {
      futex_wait(g.epoch, key);
    } else if (!futex_wait_until(g.epoch, key, *deadline)) {
      drained = group_state::drained_since(g.snapshot(), generation);
      break;
    }
  }
  g.outside_waiters.fetch_sub(1, std::memory_order_relaxed);
  return drained;
}

// Waits until g has been drained at some instant after the call; helps on g's own workers.
bool wait_drained(group_state& g, const std::chrono::steady_clock::time_point* deadline) noexcept {
  const std::uint64_t word = g.snapshot();
  if ((word & k_busy_mask) == 0) return true;
  const std::uint64_t generation = generation_of(word);
  if (g.owner().is_own_worker()) {
    group_target target(g, generation);
    return g.owner().help_until(target, deadline);
  }
  return wait_outside(g, generation, deadline);
}

}  // namespace

bool group_cancelled(const group_state& g) noexcept { return g.cancelled(); }

cancellation_token group_token(const group_state& g) noexcept {
  return cancellation_token(g.shared_from_this());
}

std::stop_token group_stop_token(group_state& g) { return g.stop_token(); }

void group_task_finished(group_state& g, outcome how, const std::exception_ptr& failure) noexcept {
  // Counted before the unit goes, so the counts are settled when a waiter sees the drain.
  switch (how) {
    case outcome::completed:
      g.completed.fetch_add(1, std::memory_order_relaxed);
      break;
    case outcome::failed:
      g.failed.fetch_add(1, std::memory_order_relaxed);
      g.record_failure(failure);
      break;
    case outcome::cancelled:
      g.skipped.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  g.leave(true);
}

void group_task_dropped(group_state& g) noexcept {
  // The group's work can no longer complete; cancelling it also stops its running tasks'
  // loops (through the token) and skips whatever of it is still queued.
  g.cancel();
  group_task_finished(g, outcome::cancelled, nullptr);
}

std::error_code group_submit(group_state& g, work_item* t, priority p) noexcept {
  // Counted before the task is visible: it may run and finish before submit() returns.
  g.submitted.fetch_add(1, std::memory_order_relaxed);
  g.enter();
  const std::error_code refused = g.owner().submit(t, p);
  if (refused) {
    g.submitted.fetch_sub(1, std::memory_order_relaxed);
    g.leave(false);  // other tasks may have drained meanwhile: this can finish the drain
  }
  return refused;
}

}  // namespace spool::detail

namespace spool {

task_group::task_group(detail::core& owner, const task_group* parent)
    : state_(std::make_shared<detail::group_state>(owner,
                                                   parent != nullptr ? parent->state_ : nullptr)) {}

task_group::task_group(pool& p) : task_group(detail::pool_access::of(p), nullptr) {}

task_group::task_group(task_group& parent) : task_group(parent.state_->owner(), &parent) {}

task_group::~task_group() {
  detail::wait_drained(*state_, nullptr);
  state_->abandon();
}

group_status task_group::wait() {
  detail::wait_drained(*state_, nullptr);
  std::exception_ptr failure;
  const group_status how = state_->status(&failure);
  if (failure != nullptr) std::rethrow_exception(std::move(failure));
  return how;
}

bool task_group::wait_until_steady(std::chrono::steady_clock::time_point deadline) noexcept {
  return detail::wait_drained(*state_, &deadline);
}

group_status task_group::status() const noexcept { return state_->status(nullptr); }

void task_group::cancel() noexcept { state_->cancel(); }

bool task_group::is_cancelled() const noexcept { return state_->cancelled(); }

cancellation_token task_group::token() const noexcept { return detail::group_token(*state_); }

std::stop_token task_group::get_stop_token() const { return detail::group_stop_token(*state_); }

void task_group::on_finished(std::function<void(group_status, std::exception_ptr)> callback) {
  state_->set_on_finished(std::move(callback));
}

std::uint64_t task_group::submitted() const noexcept {
  return state_->submitted.load(std::memory_order_relaxed);
}
std::uint64_t task_group::completed() const noexcept {
  return state_->completed.load(std::memory_order_relaxed);
}
std::uint64_t task_group::failed() const noexcept {
  return state_->failed.load(std::memory_order_relaxed);
}
std::uint64_t task_group::cancelled() const noexcept {
  return state_->skipped.load(std::memory_order_relaxed);
}

}  // namespace spool
