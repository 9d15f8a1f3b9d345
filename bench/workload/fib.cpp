#include "workload/fib.hpp"

namespace bench::fib {

// Out of line, so that the baseline and the tasks' leaves run the same code.
std::int64_t serial(int n) { return n < 2 ? n : serial(n - 1) + serial(n - 2); }

}  // namespace bench::fib
