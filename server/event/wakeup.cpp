#include "event/wakeup.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace spoold {

wakeup::wakeup() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

wakeup::~wakeup() { ::close(fd_); }

void wakeup::signal() const noexcept {
  const std::uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the waiting thread will wake anyway.
  [[maybe_unused]] const auto n = ::write(fd_, &one, sizeof one);
}

void wakeup::drain() const noexcept {
  std::uint64_t count;
  [[maybe_unused]] const auto n = ::read(fd_, &count, sizeof count);
}

}  // namespace spoold
