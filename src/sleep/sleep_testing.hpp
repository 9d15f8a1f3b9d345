// sleep/sleep_testing.hpp: the knob tests turn to make a pool crowded (sleep.cpp). Not used
// by the pool itself; tests reach it through core_testing.hpp.
#pragma once

#include <cstdint>

namespace spool::detail::scheduling_testing {

// Pools created while this is non-zero take it as their CPU count, so that a test can make a
// pool crowded on any machine. 0 restores sched_getaffinity's count.
void set_cpus(std::uint32_t n) noexcept;

}  // namespace spool::detail::scheduling_testing
