// spool/task_group.hpp: tasks that are waited for, cancelled and reported on together.
//
//   spool::task_group group{pool};
//   for (auto& part : parts) group.run([&part](spool::cancellation_token stop) {
//     while (!stop.cancelled() && part.more()) part.step();
//   });
//   if (group.wait() == spool::group_status::cancelled) ...;   // rethrows a task's exception
//
// Hazards, stated where you will read them:
//  - wait() (and the destructor) on a worker of the group's pool runs other tasks meanwhile
//    instead of blocking, so fork/join with groups finishes on a one-thread pool. Waiting on a
//    group from one of its own tasks (or a task of a group nested in it) waits for itself and
//    never returns; so does destroying a group from one of its tasks.
//  - The pool must outlive every call on the group; destroy groups before their pool.
//  - The on_finished callback runs on the thread that finished the group's last task, before
//    any wait() for that drain returns. It must not wait on, destroy, or call on_finished() on
//    its own group.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>

#include "spool/detail/work_item.hpp"
#include "spool/error.hpp"
#include "spool/spool.hpp"

namespace spool {

// How a group's tasks ended, as wait() and on_finished report it. failed wins over cancelled:
// a task threw (the group, or a group nested in it). cancelled: cancel() was called on the
// group or an ancestor, or the pool dropped one of the group's tasks (shutdown_mode::discard,
// full_policy::discard_oldest). Both are sticky: a group stays failed or cancelled for good.
enum class group_status { completed, cancelled, failed };

class cancellation_token;
class task_group;

namespace detail {

class group_state;    // src/api/task_group.cpp
struct group_access;  // the C API's way in (src/api/c_group.cpp)

// The group's side of its tasks, for the task types here and in the C API.
bool group_cancelled(const group_state& g) noexcept;
cancellation_token group_token(const group_state& g) noexcept;
// The group's cancellation as a std::stop_token (made on first use).
std::stop_token group_stop_token(group_state& g);
// A task of g has ended: ran (completed, failed with `failure`) or skipped (cancelled).
void group_task_finished(group_state& g, outcome how, const std::exception_ptr& failure) noexcept;
// The pool dropped a task of g unrun: g is cancelled, and the task counts as cancelled.
void group_task_dropped(group_state& g) noexcept;
// Counts t into g and hands it to the pool; a refusal undoes the count and frees t.
std::error_code group_submit(group_state& g, work_item* t, priority p) noexcept;

}  // namespace detail

// Tells a task whether its group has been cancelled. Cheap to copy; shares the group's state,
// so it stays usable after the group is destroyed. A default-constructed token is never
// cancelled.
class cancellation_token {
 public:
  cancellation_token() noexcept = default;
  bool cancelled() const noexcept { return state_ != nullptr && detail::group_cancelled(*state_); }

 private:
  friend cancellation_token detail::group_token(const detail::group_state& g) noexcept;
  explicit cancellation_token(std::shared_ptr<const detail::group_state> s) noexcept
      : state_(std::move(s)) {}

  std::shared_ptr<const detail::group_state> state_;
};

namespace detail {

// A callable run into a group. It skips its body if the group was cancelled before it started,
// and it is destroyed before the group counts it finished, so whatever it captured is released
// by the time wait() returns.
template <class F>
class group_task final : public work_item {
 public:
  template <class G>
  group_task(group_state& g, G&& fn) : group_(g), fn_(std::forward<G>(fn)) {}

  outcome run(core&) noexcept override {
    group_state& g = group_;
    outcome how = outcome::cancelled;
    std::exception_ptr failure;
    if (!group_cancelled(g)) {
      try {
        if constexpr (std::is_invocable_v<F&, cancellation_token>) {
          fn_(group_token(g));
        } else if constexpr (std::is_invocable_v<F&, std::stop_token>) {
          fn_(group_stop_token(g));
        } else {
          fn_();
        }
        how = outcome::completed;
      } catch (...) {
        failure = std::current_exception();
        how = outcome::failed;
      }
    }
    delete this;
    group_task_finished(g, how, failure);
    return how;
  }

  void cancel() noexcept override {
    group_state& g = group_;
    delete this;
    group_task_dropped(g);
  }

  void destroy() noexcept override { delete this; }
  const char* name() const noexcept override { return name_of(fn_); }

 private:
  group_state& group_;
  F fn_;
};

}  // namespace detail

// A set of tasks on one pool that can be waited for and cancelled together, and can nest.
//
// Counting: a task counts as pending from run() until it has finished (ran, threw, or was
// skipped or dropped); a nested group's pending tasks are pending in its parent too. wait()
// waits until the pending count is zero. The counters (submitted() and so on) count only the
// tasks run directly into this group, not those of nested groups.
//
// Not movable: tasks refer to the group's state, and a nested group to its parent's.
class task_group {
 public:
  explicit task_group(pool& p);
  // A group nested in `parent`, on the parent's pool: parent.wait() also waits for this
  // group's tasks, cancelling the parent cancels this group, and an exception thrown by a task
  // here is reported by the parent's wait() and on_finished too. The parent may be destroyed
  // first (once it has drained).
  explicit task_group(task_group& parent);
  // Waits for the pending tasks (helping on a worker), without rethrowing. A task of the group
  // must not destroy it: that would wait for itself. If a task threw and the exception was not
  // delivered otherwise, the destructor hands the group's first exception to the pool's
  // config::on_exception (stderr if that is empty), on the destroying thread; later exceptions
  // are counted in failed() and in stats::failed only, as for wait(). Delivered otherwise
  // means: a wait() rethrew it, an on_finished callback is set (it received it), or the group
  // is nested and its parent's task_group still lives (the parent's wait(), callback or
  // destructor reports it; a parent already destroyed leaves the report to this group).
  ~task_group();
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;

  // Runs f on the pool as a task of this group. f is invoked as f(token()) if it accepts a
  // cancellation_token, as f(get_stop_token()) if it accepts a std::stop_token, else as f(). If the
  // group (or an ancestor) is cancelled before the task starts, f is not invoked: it is destroyed
  // and the task counts as cancelled (in cancelled() and in the pool's stats::cancelled); this
  // holds for tasks run after cancel() too. An exception f throws is counted in failed() and
  // reported by wait() and on_finished. Throws spool::error, with the group's counts unchanged, if
  // the pool refuses the task (as pool::post does). From a worker of the pool it never blocks.
  template <class F>
  void run(F&& f) {
    run(priority::normal, std::forward<F>(f));
  }
  template <class F>
  void run(priority p, F&& f) {
    using fn_type = std::decay_t<F>;
    static_assert(std::is_invocable_v<fn_type&, cancellation_token> ||
                      std::is_invocable_v<fn_type&, std::stop_token> ||
                      std::is_invocable_v<fn_type&>,
                  "task_group::run needs a callable taking (), (spool::cancellation_token) or "
                  "(std::stop_token)");
    detail::check_callable(f);
    detail::work_item* t;
    try {
      t = new detail::group_task<fn_type>(*state_, std::forward<F>(f));
    } catch (...) {
      throw error(errc::no_memory);  // as pool::post reports it
    }
    pool::throw_if_error(detail::group_submit(*state_, t, p));
  }

  // Blocks until no task of the group or of a group nested in it is pending; on a worker of
  // the group's pool it runs other tasks meanwhile. If a task threw, the first wait() to see
  // it rethrows the group's first exception; every later wait() returns failed without
  // rethrowing (the exception stays available to on_finished). Otherwise returns cancelled or
  // completed (see group_status). Tasks run while wait() waits extend the wait until the count
  // reaches zero; once it has been zero at any instant after the call began, wait() returns.
  group_status wait();

  // As wait(), up to a timeout or deadline; true if the group drained. They do not rethrow or
  // report the status: a following wait() does (and returns at once, unless more was run).
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& timeout) {
    return wait_until_steady(std::chrono::steady_clock::now() +
                             std::chrono::ceil<std::chrono::steady_clock::duration>(timeout));
  }
  template <class Clock, class Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    const auto left =
        std::chrono::ceil<std::chrono::steady_clock::duration>(deadline - Clock::now());
    return wait_until_steady(std::chrono::steady_clock::now() + left);
  }

  // Tasks of this group and of groups nested in it that have not started are skipped (counted
  // cancelled); running ones see token().cancelled() and may stop early. Idempotent.
  void cancel() noexcept;
  // cancel() was called on this group or an ancestor, or the pool dropped one of its tasks.
  bool is_cancelled() const noexcept;
  cancellation_token token() const noexcept;
  // The group's cancellation as a std::stop_token: stop is requested when the group or an
  // ancestor is cancelled (as token().cancelled() turns true). Give it to pool::submit,
  // pool::post or spool::start to cancel that work with the group; it stays valid after the
  // group is destroyed. Throws std::bad_alloc if its state cannot be made.
  std::stop_token get_stop_token() const;

  // Sets (or, with an empty function, clears) the callback told of each drain: each time the
  // pending count drops to zero after at least one task finished, it is called with the
  // group's status and first exception (or null). It runs on the thread that removed the last
  // pending unit: normally the one that finished the last task (a worker, or the thread that
  // dropped it in shutdown(discard)); rarely a thread inside run() whose withdrawn count was
  // the last (a refused submission, or a run() into a nested group racing with the drain).
  // It returns before any wait() for that drain returns, so the group may be waited for and
  // destroyed right after. Calls never overlap (one can nest only if the callback itself
  // finishes a drain on its own thread). An exception it throws goes to config::on_exception.
  void on_finished(std::function<void(group_status, std::exception_ptr)> callback);

  // Tasks of this group (not of nested groups): accepted by the pool, and of those, finished
  // normally, threw, or were skipped or dropped. Settled after wait() returns.
  std::uint64_t submitted() const noexcept;
  std::uint64_t completed() const noexcept;
  std::uint64_t failed() const noexcept;
  std::uint64_t cancelled() const noexcept;

 private:
  friend struct detail::group_access;
  task_group(detail::core& owner, const task_group* parent);
  bool wait_until_steady(std::chrono::steady_clock::time_point deadline) noexcept;
  // What wait() reports once drained, without waiting or rethrowing.
  group_status status() const noexcept;

  std::shared_ptr<detail::group_state> state_;
};

}  // namespace spool
