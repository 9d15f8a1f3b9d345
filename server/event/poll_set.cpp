#include "event/poll_set.hpp"

#include <cerrno>

namespace spoold {

bool poll_set::wait(steady_clock::time_point until, steady_clock::time_point now) noexcept {
  const int timeout = until == steady_clock::time_point::max() ? -1 : poll_timeout(until, now);
  const int n = ::poll(fds_.data(), fds_.size(), timeout);
  if (n < 0) {
    ready_ = 0;
    return errno == EINTR;
  }
  ready_ = n;
  return true;
}

}  // namespace spoold
