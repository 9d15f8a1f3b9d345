// load_experiments.hpp: the subcommands of spool-load-bench, one file each; with what every
// experiment file uses (options, the repeat loop, progress lines).
#pragma once

#include <vector>

#include "load_options.hpp"
#include "measure_point.hpp"
#include "progress.hpp"

namespace bench {

const experiment& http_experiment();
const experiment& siege_experiment();
const experiment& cluster_experiment();

// Each drives programs outside spool-load-bench (spoold, nginx, wrk, siege, a fleet behind
// HAProxy) and takes minutes: there is no `all`; each runs when named.
inline std::vector<const experiment*> load_experiments() {
  return {&http_experiment(), &siege_experiment(), &cluster_experiment()};
}

}  // namespace bench
