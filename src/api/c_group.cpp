// api/c_group.cpp: the C API's task groups (spool.h) over spool::task_group.
#include <chrono>
#include <exception>
#include <new>

#include "api/c_task.hpp"
#include "core.hpp"
#include "spool/spool.h"
#include "spool/task_group.hpp"

struct spool_group {
  spool_pool* pool;
  spool::task_group group;
};

// What spool_group_submit2's function is given: its group, or null for "cancelled for good"
// (the task was skipped or dropped). Lives on the stack of the call it is passed to.
struct spool_cancel_token {
  const spool::detail::group_state* group;
};

namespace spool::detail {

// What the C API needs of a task_group beyond its public face.
struct group_access {
  static spool_group* create(spool_pool* pool, spool_group* parent) {
    return new spool_group{pool,
                           task_group(pool->core, parent != nullptr ? &parent->group : nullptr)};
  }
  static group_state& state(spool_group& g) noexcept { return *g.group.state_; }
  static group_status status(const spool_group& g) noexcept { return g.group.status(); }
};

namespace {

// A C function run into a group. A C task cannot throw, so its group never fails; skipped or
// dropped, it hands arg back through on_cancel before the group counts it finished, so every
// hook has run by the time spool_group_wait returns.
class c_group_task final : public work_item {
 public:
  c_group_task(group_state& g, void (*fn)(void*), void* arg, void (*on_cancel)(void*)) noexcept
      : group_(g), fn_(fn), arg_(arg), on_cancel_(on_cancel) {}

  outcome run(core&) noexcept override {
    group_state& g = group_;
    const auto fn = fn_;
    const auto hook = on_cancel_;
    void* arg = arg_;
    delete this;
    if (group_cancelled(g)) {
      if (hook != nullptr) hook(arg);
      group_task_finished(g, outcome::cancelled, nullptr);
      return outcome::cancelled;
    }
    fn(arg);
    group_task_finished(g, outcome::completed, nullptr);
    return outcome::completed;
  }

  void cancel() noexcept override {
    group_state& g = group_;
    const auto hook = on_cancel_;
    void* arg = arg_;
    delete this;
    if (hook != nullptr) hook(arg);
    group_task_dropped(g);
  }

  void destroy() noexcept override { delete this; }

 private:
  group_state& group_;
  void (*fn_)(void*);
  void* arg_;
  void (*on_cancel_)(void*);
};

// A C function that learns its cancellation from its argument (spool_group_submit2): it is
// called exactly once whatever happens to it (except a refused submission), with a token
// that spool_cancel_requested() reads. Run normally, the token follows the group live; skipped
// because the group was cancelled first, or dropped by the pool, it says cancelled from the
// start, and the call is the task's chance to release arg.
class c_group_task2 final : public work_item {
 public:
  c_group_task2(group_state& g, void (*fn)(void*, const spool_cancel_token*), void* arg) noexcept
      : group_(g), fn_(fn), arg_(arg) {}

  outcome run(core&) noexcept override {
    group_state& g = group_;
    const auto fn = fn_;
    void* arg = arg_;
    delete this;
    const spool_cancel_token token{&g};
    const bool skipped = group_cancelled(g);
    fn(arg, skipped ? &dropped_token : &token);
    const outcome how = skipped ? outcome::cancelled : outcome::completed;
    group_task_finished(g, how, nullptr);
    return how;
  }

  void cancel() noexcept override {
    group_state& g = group_;
    const auto fn = fn_;
    void* arg = arg_;
    delete this;
    fn(arg, &dropped_token);
    group_task_dropped(g);
  }

  void destroy() noexcept override { delete this; }

  static const spool_cancel_token dropped_token;

 private:
  group_state& group_;
  void (*fn_)(void*, const spool_cancel_token*);
  void* arg_;
};

const spool_cancel_token c_group_task2::dropped_token{nullptr};

// A C group's tasks cannot throw, so its status is completed or cancelled.
int status_to_c(group_status how) noexcept {
  return how == group_status::completed ? SPOOL_OK : SPOOL_ECANCELED;
}

}  // namespace
}  // namespace spool::detail

extern "C" {

int spool_group_create(spool_pool* pool, spool_group* parent, spool_group** out) {
  if (out == nullptr) return SPOOL_EINVAL;
  *out = nullptr;
  if (pool == nullptr || (parent != nullptr && parent->pool != pool)) return SPOOL_EINVAL;
  try {
    *out = spool::detail::group_access::create(pool, parent);
  } catch (const std::bad_alloc&) {
    return SPOOL_ENOMEM;
  }
  return SPOOL_OK;
}

int spool_group_submit_priority(spool_group* group, int priority, void (*fn)(void*), void* arg,
                                void (*on_cancel)(void*)) {
  if (group == nullptr || fn == nullptr) return SPOOL_EINVAL;
  if (priority < SPOOL_PRIORITY_LOW || priority > SPOOL_PRIORITY_HIGH) return SPOOL_EINVAL;
  spool::detail::group_state& g = spool::detail::group_access::state(*group);
  auto* t = new (std::nothrow) spool::detail::c_group_task(g, fn, arg, on_cancel);
  if (t == nullptr) return SPOOL_ENOMEM;
  return spool::detail::to_c(
      spool::detail::group_submit(g, t, static_cast<spool::priority>(priority)));
}

int spool_group_submit(spool_group* group, void (*fn)(void*), void* arg, void (*on_cancel)(void*)) {
  return spool_group_submit_priority(group, SPOOL_PRIORITY_NORMAL, fn, arg, on_cancel);
}

int spool_group_submit2(spool_group* group, int priority,
                        void (*fn)(void* arg, const spool_cancel_token* token), void* arg) {
  if (group == nullptr || fn == nullptr) return SPOOL_EINVAL;
  if (priority < SPOOL_PRIORITY_LOW || priority > SPOOL_PRIORITY_HIGH) return SPOOL_EINVAL;
  spool::detail::group_state& g = spool::detail::group_access::state(*group);
  auto* t = new (std::nothrow) spool::detail::c_group_task2(g, fn, arg);
  if (t == nullptr) return SPOOL_ENOMEM;
  return spool::detail::to_c(
      spool::detail::group_submit(g, t, static_cast<spool::priority>(priority)));
}

int spool_cancel_requested(const spool_cancel_token* token) {
  if (token == nullptr) return SPOOL_EINVAL;
  return token->group == nullptr || spool::detail::group_cancelled(*token->group) ? 1 : 0;
}

int spool_group_wait(spool_group* group, long timeout_ms) {
  if (group == nullptr) return SPOOL_EINVAL;
  // Past this, the deadline would overflow the clock; nobody waits that long on purpose.
  constexpr long forever_ms = 10L * 365 * 24 * 3600 * 1000;
  if (timeout_ms < 0 || timeout_ms > forever_ms) {
    // C tasks cannot throw, so wait() has nothing to rethrow.
    return spool::detail::status_to_c(group->group.wait());
  }
  if (!group->group.wait_for(std::chrono::milliseconds(timeout_ms))) return SPOOL_ETIMEDOUT;
  return spool::detail::status_to_c(spool::detail::group_access::status(*group));
}

int spool_group_cancel(spool_group* group) {
  if (group == nullptr) return SPOOL_EINVAL;
  group->group.cancel();
  return SPOOL_OK;
}

int spool_group_is_cancelled(const spool_group* group) {
  if (group == nullptr) return SPOOL_EINVAL;
  return group->group.is_cancelled() ? 1 : 0;
}

int spool_group_on_finished(spool_group* group, void (*cb)(int status, void* arg), void* arg) {
  if (group == nullptr) return SPOOL_EINVAL;
  try {
    if (cb == nullptr) {
      group->group.on_finished(nullptr);
    } else {
      group->group.on_finished([cb, arg](spool::group_status how, const std::exception_ptr&) {
        cb(spool::detail::status_to_c(how), arg);
      });
    }
  } catch (const std::bad_alloc&) {
    return SPOOL_ENOMEM;
  }
  return SPOOL_OK;
}

int spool_group_destroy(spool_group* group) {
  if (group == nullptr) return SPOOL_EINVAL;
  delete group;  // ~task_group waits for the pending tasks
  return SPOOL_OK;
}

}  // extern "C"
