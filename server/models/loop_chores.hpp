// models/loop_chores.hpp: an event loop's work that is not a connection's, scheduled only when
// there is some, so an idle loop sleeps until an event instead of waking on a period:
//  - the access log's buffer, written log_flush_delay after this loop saw a line waiting;
//  - the memory trim, once the loop has no connection open after deleting some (memory_trim).
// The loop asks next() for when to wake (with its connections' own deadlines) and calls run()
// after each turn.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "app/access_log.hpp"
#include "models/memory_trim.hpp"

namespace spoold {

class loop_chores {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr auto log_flush_delay = std::chrono::milliseconds(100);

  explicit loop_chores(access_log* log) noexcept : log_(log) {}

  void connections_deleted() noexcept { trim_.connections_deleted(); }

  // After a turn, with `open` connections open: does what is due and schedules what a line
  // written meanwhile needs.
  void run(std::size_t open, clock::time_point now) {
    if (log_ != nullptr) {
      if (now >= flush_at_) {
        log_->flush();
        flush_at_ = clock::time_point::max();
      }
      if (flush_at_ == clock::time_point::max() && log_->pending()) {
        flush_at_ = now + log_flush_delay;
      }
    }
    trim_.on_tick(open, now);
  }

  // When run() next has something to do, with `open` connections open; max() for never.
  [[nodiscard]] clock::time_point next(std::size_t open) const noexcept {
    return std::min(flush_at_, trim_.due(open));
  }

 private:
  access_log* log_;
  clock::time_point flush_at_ = clock::time_point::max();
  memory_trim trim_;
};

}  // namespace spoold
