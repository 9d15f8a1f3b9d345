// sync/cpu_relax.hpp: hints to the processor. cpu_relax() is the spin-wait hint, for loops
// that poll shared memory: it frees pipeline resources for a sibling hyperthread and slows the
// loop's reads of a contended line. prefetch_for_write() moves a line here ahead of a store.
#pragma once

namespace spool::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Starts moving p's line into this core's cache in the state a store needs (PREFETCHW on
// x86-64). A plain prefetch, all that __builtin_prefetch(p, 1) gives without -mprfchw, fetches
// a line another core wrote as shared, and the store then still waits for that core to give
// it up. Every x86-64 processor since about 2014 has PREFETCHW; it is a hint and never faults.
inline void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

}  // namespace spool::detail
