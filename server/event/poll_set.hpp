// One turn of a thread that waits in poll(): the descriptors it watches this turn, one wait
// until an event or a deadline, and what each descriptor reported.
//
// The poll-based loops (the poll model, a connection served inline, refused connections that
// linger, pending TLS handshakes, the forking and preforked supervisors) rebuild their set every
// turn, because their connections come and go between turns; the set keeps its storage from
// turn to turn. What they share is here once: the timeout from a deadline (never early, none
// for time_point::max()), a signal that interrupts the wait counting as a turn without events,
// and revents() reading 0 for every descriptor unless the wait reported events.
#pragma once

#include <poll.h>

#include <cstddef>
#include <vector>

#include "event/stop_signal.hpp"

namespace spoold {

class poll_set {
 public:
  // Starts a turn: no descriptors, no events.
  void clear() noexcept {
    fds_.clear();
    ready_ = 0;
  }
  // Watches fd for `events` this turn. Returns its index for revents(). May throw
  // std::bad_alloc while the set grows past its largest turn so far.
  std::size_t add(int fd, short events) {
    fds_.push_back({fd, events, 0});
    return fds_.size() - 1;
  }
  [[nodiscard]] std::size_t size() const noexcept { return fds_.size(); }

  // Waits until a descriptor of the set has an event or until `until` (time_point::max(): no
  // timeout; `now` or earlier: only looks). True: the turn may go on, with or without events
  // (an interrupting signal is a turn without events). False: poll() failed otherwise, errno
  // says why, and no descriptor reports an event.
  bool wait(steady_clock::time_point until, steady_clock::time_point now) noexcept;

  // What descriptor i reported in this turn's wait: 0 before the wait, after a wait that timed
  // out or failed, and for a descriptor without events.
  [[nodiscard]] short revents(std::size_t i) const noexcept {
    return ready_ > 0 ? fds_[i].revents : short{0};
  }

 private:
  std::vector<pollfd> fds_;
  int ready_ = 0;  // poll()'s count of descriptors with events in this turn
};

}  // namespace spoold
