// cores.hpp: how many threads a multi-threaded benchmark may use. Google Benchmark times each
// thread's own loop and averages them; with more threads than cores, threads that wait for a
// core shorten that average and inflate the rates, so the benchmarks stop at one per core
// (and at least 2, which a producer/consumer pair needs).
#pragma once

#include <algorithm>
#include <thread>

namespace spool_micro {

inline int cores() noexcept {
  return std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace spool_micro
