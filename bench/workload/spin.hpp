// spin.hpp: busy work measured in wall time.
#pragma once

#include <chrono>

namespace bench {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Burns the calling thread's core until `d` has passed on steady_clock. A task that spins
// (rather than sleeps) keeps its worker busy, so a pool that leaves a long task queued behind
// another on one worker while a second worker idles shows it in the wall time.
inline void spin_for(std::chrono::nanoseconds d) noexcept {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) cpu_relax();
}

}  // namespace bench
