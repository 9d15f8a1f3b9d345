// backoff.hpp: how a benchmark thread waits for another without a lock. It spins with the
// CPU's pause hint a while, then yields, so that when there are more benchmark threads than
// cores the thread it waits for gets a core instead of a spinning neighbour.
#pragma once

#include <thread>

#include "sync/cpu_relax.hpp"

namespace spool_micro {

// The same hint as the worker loop's.
using spool::detail::cpu_relax;

class backoff {
 public:
  void pause() noexcept {
    if (spins_ < kSpinLimit) {
      ++spins_;
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }

 private:
  static constexpr int kSpinLimit = 64;
  int spins_ = 0;
};

}  // namespace spool_micro
