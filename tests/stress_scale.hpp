// Iteration counts for stress tests, scaled by SPOOL_STRESS_SCALE (default 1) so the sanitizer
// builds, which run several times slower, can repeat the racy paths fewer times within CI's budget.
#pragma once

#include <algorithm>
#include <cstdlib>

inline int stress_iterations(int base) {
  double scale = 1.0;
  if (const char* s = std::getenv("SPOOL_STRESS_SCALE")) scale = std::atof(s);
  return std::max(1, static_cast<int>(base * scale));
}
