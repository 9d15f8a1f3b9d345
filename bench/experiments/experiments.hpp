// experiments.hpp: the subcommands of spool-bench, one file each, in the order `all` runs them;
// with what every experiment file uses (options, the repeat loop, progress lines and checks).
#pragma once

#include <vector>

#include "measure_point.hpp"
#include "options.hpp"
#include "progress.hpp"

namespace bench {

const experiment& empty_experiment();
const experiment& quicksort_experiment();
const experiment& fib_experiment();
const experiment& coro_experiment();
const experiment& latency_experiment();
const experiment& unbalanced_experiment();
const experiment& pc_experiment();
const experiment& idle_experiment();
const experiment& elastic_experiment();
const experiment& timers_experiment();

inline std::vector<const experiment*> all_experiments() {
  return {&empty_experiment(),   &quicksort_experiment(),  &fib_experiment(), &coro_experiment(),
          &latency_experiment(), &unbalanced_experiment(), &pc_experiment(),  &idle_experiment(),
          &elastic_experiment(), &timers_experiment()};
}

}  // namespace bench
