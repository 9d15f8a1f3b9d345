// sleep/futex.hpp: sleeping on a 32-bit atomic word (Linux futex). Every wait may return
// spuriously; callers re-check their condition in a loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace spool::detail {

// Sleeps while word == expected.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept;
// As futex_wait, until the deadline. Returns false once the deadline has passed.
bool futex_wait_until(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      std::chrono::steady_clock::time_point deadline) noexcept;
// Wakes up to `count` threads sleeping on word.
void futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept;

}  // namespace spool::detail
