// api/c_timer.cpp: the C API's delayed and periodic tasks and its cancellable submissions
// (spool.h, "timers and cancellation"), over the timer queue (timers/) and the task claim
// that future::cancel() uses.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <new>
#include <stop_token>

#include "api/c_task.hpp"
#include "core.hpp"
#include "spool/spool.h"

namespace spool::detail {
namespace {

// A C function behind a timer_entry. on_cancel(arg) is called once when the timer stops
// without having run to its end: always for a periodic timer (it has no other end), for a
// one-shot timer only if fn never ran. Not when the timer queue refused it at once (the
// caller keeps arg, as with a refused submission).
class c_timer final : public timer_entry {
 public:
  c_timer(core& owner, std::chrono::nanoseconds period, void (*fn)(void*), void* arg,
          void (*on_cancel)(void*)) noexcept
      : timer_entry(owner, period), fn_(fn), arg_(arg), on_cancel_(on_cancel) {}
  void call() override { fn_(arg_); }
  void end(ending how, std::error_code) noexcept override {
    if ((how == ending::stopped || how == ending::refused) && on_cancel_ != nullptr) {
      on_cancel_(arg_);
    }
  }

 private:
  void (*fn_)(void*);
  void* arg_;
  void (*on_cancel_)(void*);
};

// A C task with a handle: the task and spool_task_cancel() race for one claim, as a future's
// task and future::cancel() do (detail::state_base::try_claim); two references, the task's
// and the handle's.
class c_cancellable final : public work_item {
 public:
  c_cancellable(void (*fn)(void*), void* arg, void (*on_cancel)(void*)) noexcept
      : fn_(fn), arg_(arg), on_cancel_(on_cancel) {}

  outcome run(core&) noexcept override {
    const bool mine = claim();
    if (mine) fn_(arg_);
    release();
    return mine ? outcome::completed : outcome::cancelled;
  }
  void cancel() noexcept override {
    if (claim() && on_cancel_ != nullptr) on_cancel_(arg_);
    release();
  }
  void destroy() noexcept override { delete this; }  // refused: no handle was handed out

  bool cancel_request() noexcept {
    if (!claim()) return false;
    if (on_cancel_ != nullptr) on_cancel_(arg_);
    return true;
  }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  bool claim() noexcept {
    bool expected = false;
    return claimed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel);
  }

  void (*fn_)(void*);
  void* arg_;
  void (*on_cancel_)(void*);
  std::atomic<bool> claimed_{false};
  std::atomic<std::uint32_t> refs_{2};
};

// A C task that a stop source skips: checked when a worker takes it (no callback to register,
// so the source may go while the task is queued: the token shares its state).
class c_stoppable final : public work_item {
 public:
  c_stoppable(std::stop_token st, void (*fn)(void*), void* arg, void (*on_cancel)(void*)) noexcept
      : st_(std::move(st)), call_{fn, arg, on_cancel} {}

  outcome run(core&) noexcept override {
    if (st_.stop_requested()) {
      cancel();
      return outcome::cancelled;
    }
    return call_.run_and_free(this);
  }
  void cancel() noexcept override { call_.cancel_and_free(this); }
  void destroy() noexcept override { delete this; }

 private:
  std::stop_token st_;
  c_call call_;
};

// Past this, a deadline would overflow the clock; treated as never.
std::chrono::nanoseconds delay_of(std::uint64_t ns) noexcept {
  constexpr std::uint64_t max = static_cast<std::uint64_t>(std::chrono::nanoseconds::max().count());
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns > max ? max : ns));
}

int post_timer(spool_pool* pool, int priority, std::uint64_t delay_ns, std::uint64_t period_ns,
               void (*fn)(void*), void* arg, void (*on_cancel)(void*), spool_timer** handle) {
  if (handle != nullptr) *handle = nullptr;
  if (pool == nullptr || fn == nullptr) return SPOOL_EINVAL;
  if (priority < SPOOL_PRIORITY_LOW || priority > SPOOL_PRIORITY_HIGH) return SPOOL_EINVAL;
  auto* e = new (std::nothrow) c_timer(pool->core, delay_of(period_ns), fn, arg, on_cancel);
  if (e == nullptr) return SPOOL_ENOMEM;
  e->deadline = deadline_after(delay_of(delay_ns));
  e->prio = static_cast<spool::priority>(priority);
  if (std::error_code ec = pool->core.timer_queue().schedule(*e)) {
    e->end(timer_entry::ending::unscheduled, ec);
    e->release();
    e->release();
    return to_c(ec);
  }
  if (handle != nullptr) {
    *handle = reinterpret_cast<spool_timer*>(static_cast<timer_entry*>(e));
  } else {
    e->release();
  }
  return SPOOL_OK;
}

}  // namespace
}  // namespace spool::detail

struct spool_stop_source {
  std::stop_source source;
};

using spool::detail::c_cancellable;
using spool::detail::c_stoppable;
using spool::detail::timer_entry;

extern "C" {

int spool_post_after(spool_pool* pool, uint64_t delay_ns, void (*fn)(void*), void* arg,
                     void (*on_cancel)(void*), spool_timer** handle) {
  return spool::detail::post_timer(pool, SPOOL_PRIORITY_NORMAL, delay_ns, 0, fn, arg, on_cancel,
                                   handle);
}

int spool_post_every(spool_pool* pool, uint64_t period_ns, void (*fn)(void*), void* arg,
                     void (*on_cancel)(void*), spool_timer** handle) {
  if (handle != nullptr) *handle = nullptr;
  if (period_ns == 0) return SPOOL_EINVAL;
  return spool::detail::post_timer(pool, SPOOL_PRIORITY_NORMAL, period_ns, period_ns, fn, arg,
                                   on_cancel, handle);
}

int spool_post_after_priority(spool_pool* pool, int priority, uint64_t delay_ns, uint64_t period_ns,
                              void (*fn)(void*), void* arg, void (*on_cancel)(void*),
                              spool_timer** handle) {
  return spool::detail::post_timer(pool, priority, delay_ns, period_ns, fn, arg, on_cancel, handle);
}

int spool_timer_cancel(spool_timer* timer) {
  if (timer == nullptr) return SPOOL_EINVAL;
  return reinterpret_cast<timer_entry*>(timer)->cancel() ? 1 : 0;
}

int spool_timer_release(spool_timer* timer) {
  if (timer == nullptr) return SPOOL_EINVAL;
  reinterpret_cast<timer_entry*>(timer)->release();
  return SPOOL_OK;
}

int spool_submit_cancellable(spool_pool* pool, int priority, void (*fn)(void*), void* arg,
                             void (*on_cancel)(void*), spool_task** handle) {
  if (handle != nullptr) *handle = nullptr;
  if (pool == nullptr || fn == nullptr || handle == nullptr) return SPOOL_EINVAL;
  if (priority < SPOOL_PRIORITY_LOW || priority > SPOOL_PRIORITY_HIGH) return SPOOL_EINVAL;
  auto* t = new (std::nothrow) c_cancellable(fn, arg, on_cancel);
  if (t == nullptr) return SPOOL_ENOMEM;
  // The handle is written before the task is visible: the task may run and drop its
  // reference at once, but the handle's keeps it alive.
  *handle = reinterpret_cast<spool_task*>(t);
  if (int rc = spool::detail::to_c(pool->core.submit(t, static_cast<spool::priority>(priority)));
      rc != SPOOL_OK) {
    *handle = nullptr;  // refused: the task is already freed
    return rc;
  }
  return SPOOL_OK;
}

int spool_task_cancel(spool_task* task) {
  if (task == nullptr) return SPOOL_EINVAL;
  return reinterpret_cast<c_cancellable*>(task)->cancel_request() ? 1 : 0;
}

int spool_task_release(spool_task* task) {
  if (task == nullptr) return SPOOL_EINVAL;
  reinterpret_cast<c_cancellable*>(task)->release();
  return SPOOL_OK;
}

int spool_stop_source_create(spool_stop_source** out) {
  if (out == nullptr) return SPOOL_EINVAL;
  *out = nullptr;
  try {
    *out = new spool_stop_source;
  } catch (...) {
    return SPOOL_ENOMEM;
  }
  return SPOOL_OK;
}

int spool_stop_source_request(spool_stop_source* source) {
  if (source == nullptr) return SPOOL_EINVAL;
  return source->source.request_stop() ? 1 : 0;
}

int spool_stop_source_requested(const spool_stop_source* source) {
  if (source == nullptr) return SPOOL_EINVAL;
  return source->source.stop_requested() ? 1 : 0;
}

int spool_stop_source_destroy(spool_stop_source* source) {
  if (source == nullptr) return SPOOL_EINVAL;
  delete source;
  return SPOOL_OK;
}

int spool_submit_stoppable(spool_pool* pool, int priority, spool_stop_source* source,
                           void (*fn)(void*), void* arg, void (*on_cancel)(void*)) {
  if (pool == nullptr || fn == nullptr || source == nullptr) return SPOOL_EINVAL;
  if (priority < SPOOL_PRIORITY_LOW || priority > SPOOL_PRIORITY_HIGH) return SPOOL_EINVAL;
  if (source->source.stop_requested()) return SPOOL_ECANCELED;
  auto* t = new (std::nothrow) c_stoppable(source->source.get_token(), fn, arg, on_cancel);
  if (t == nullptr) return SPOOL_ENOMEM;
  return spool::detail::to_c(pool->core.submit(t, static_cast<spool::priority>(priority)));
}

}  // extern "C"
