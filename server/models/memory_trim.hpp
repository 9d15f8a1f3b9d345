// Handing back what a wave of connections freed. Their objects and input buffers go back to
// the malloc arenas, which give memory to the system only from their top, so without a trim
// the process keeps the high-water mark of its busiest moment. An event loop (epoll, poll)
// tells this object when it deletes connections and asks it on every idle tick; it trims when
// the loop has no connection open, at most once per interval and only after deletions, so an
// idle server does not trim again and again and a loaded one (never at zero) never pays for it.
#pragma once

#include <malloc.h>

#include <chrono>
#include <cstddef>

namespace spoold {

class memory_trim {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr auto interval = std::chrono::seconds(1);

  void connections_deleted() noexcept { deleted_ = true; }
  // `open`: the loop's connections open now.
  void on_tick(std::size_t open, clock::time_point now) noexcept {
    if (!deleted_ || open != 0 || now < next_) return;
    ::malloc_trim(0);  // every arena, not only the calling thread's
    deleted_ = false;
    next_ = now + interval;
  }

 private:
  bool deleted_ = false;  // connections deleted since the last trim
  clock::time_point next_{};
};

}  // namespace spoold
