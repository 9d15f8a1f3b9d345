// memory/task_memory_testing.hpp: hooks into task memory (task_memory.cpp) for its tests,
// which must reach the path a thread takes when the shared depot is busy, and see which blocks
// come from rings. Not used by the pool itself.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spool::detail::task_memory_testing {

// Whether blocks are recycled at all (not under AddressSanitizer, where every task goes to the
// global operators so that a use after free is caught).
bool recycling() noexcept;
// Takes or releases the depot's lock of the size class that blocks of `size` bytes use, as a
// thread trading magazines would hold it. No effect when not recycling().
void hold_depot(std::size_t size) noexcept;
void release_depot(std::size_t size) noexcept;
// How many times, since the process began, a thread found a depot busy and used the global
// operators instead of waiting for it.
std::uint64_t busy_fallbacks() noexcept;
// Whether `p` is a block of some thread's ring (false when not recycling()).
bool in_ring(const void* p) noexcept;
// How many more blocks than it freed a thread allocates for tasks of `size` bytes before it
// asks for a ring of their class, and how many such blocks a ring holds (0 if tasks of that
// size never use rings).
std::size_t ring_after() noexcept;
std::size_t ring_capacity(std::size_t size) noexcept;

}  // namespace spool::detail::task_memory_testing
