// cpu_relax.hpp: the processor's spin-wait hint, for loops that poll shared memory. It frees
// pipeline resources for a sibling hyperthread and slows the loop's reads of a contended line.
#pragma once

namespace spool::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace spool::detail
