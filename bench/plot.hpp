// plot.hpp: bar charts of the medians, drawn by gnuplot.
#pragma once

#include <string>
#include <string_view>

#include "results.hpp"

namespace bench {

// Where the chart of `experiment` goes: `target` itself for a single experiment; for `all`,
// target/<experiment>.png if target ends in '/' or is a directory, else target-<experiment>.png.
std::string plot_path(const std::string& target, std::string_view experiment, bool many);

// One PNG per experiment: a cluster of bars (one per peer) for each variant and thread count.
// An experiment with more than one unit gets one file per unit (name suffixed with the unit).
// Returns false, with a message on stderr, if gnuplot is missing or fails.
bool plot_experiment(const results& r, std::string_view experiment, const std::string& png_path);

}  // namespace bench
