// spool/timer.hpp: the handle of a delayed or periodic task (pool::post_after, post_at,
// post_every).
#pragma once

#include <utility>

#include "spool/detail/timer.hpp"

namespace spool {

// A handle on one timer. Move-only. Destroying the handle (or moving another into it) does
// not cancel the timer: it runs as scheduled, like a posted task, and the pool ends it (a
// one-shot timer after its run; a periodic one at cancel() or shutdown). Keep the handle to
// be able to cancel it.
class timer {
 public:
  timer() noexcept = default;
  timer(timer&& other) noexcept : entry_(std::exchange(other.entry_, nullptr)) {}
  timer& operator=(timer&& other) noexcept {
    if (this != &other) {
      reset();
      entry_ = std::exchange(other.entry_, nullptr);
    }
    return *this;
  }
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;
  ~timer() { reset(); }

  // Stops the timer. Returns true if that prevented a run that would otherwise have
  // started: a one-shot timer not yet due, or due with its task still queued; a periodic
  // timer that was still live (a run in progress then finishes, but none follows). Returns
  // false if the timer had already ended (its one run started, it was cancelled, the pool
  // dropped it or shut down), and for an empty handle. The callable is destroyed by
  // whichever thread holds it when the timer ends: cancel() itself if the timer was waiting
  // for its deadline, else the worker or the timer thread that meets the cancellation.
  // Safe from any thread, including the timer's own callable, and after the pool is gone.
  bool cancel() noexcept { return entry_ != nullptr && entry_->cancel(); }

  // True while the timer may still run: not cancelled, not ended. A snapshot.
  bool active() const noexcept { return entry_ != nullptr && !entry_->done(); }
  bool valid() const noexcept { return entry_ != nullptr; }

 private:
  friend class pool;
  explicit timer(detail::timer_entry* e) noexcept : entry_(e) {}
  void reset() noexcept {
    if (entry_ != nullptr) std::exchange(entry_, nullptr)->release();
  }

  detail::timer_entry* entry_ = nullptr;
};

}  // namespace spool
