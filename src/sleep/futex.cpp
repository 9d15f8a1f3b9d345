// sleep/futex.cpp: the futex system calls behind futex.hpp.
#include "sleep/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace spool::detail {
namespace {

// std::atomic<uint32_t> is a plain 32-bit word on Linux (static_assert below), which is what
// the kernel compares and sleeps on.
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

std::uint32_t* address(std::atomic<std::uint32_t>& word) noexcept {
  return reinterpret_cast<std::uint32_t*>(&word);
}

}  // namespace

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  // EAGAIN (value changed), EINTR (signal) and wake-ups all return to the caller's loop.
  syscall(SYS_futex, address(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

bool futex_wait_until(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      std::chrono::steady_clock::time_point deadline) noexcept {
  // steady_clock is CLOCK_MONOTONIC on Linux; FUTEX_WAIT_BITSET takes an absolute time on it.
  auto since_epoch = deadline.time_since_epoch();
  if (since_epoch.count() < 0) return false;
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  timespec abs{};
  abs.tv_sec = static_cast<time_t>(secs.count());
  abs.tv_nsec = static_cast<long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - secs).count());
  long rc = syscall(SYS_futex, address(word), FUTEX_WAIT_BITSET_PRIVATE, expected, &abs, nullptr,
                    FUTEX_BITSET_MATCH_ANY);
  if (rc == -1 && errno == ETIMEDOUT) return false;
  return std::chrono::steady_clock::now() < deadline;
}

void futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept {
  syscall(SYS_futex, address(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

}  // namespace spool::detail
