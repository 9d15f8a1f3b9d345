// plot.hpp: bar charts of the medians, and line charts of a trace over time, drawn by gnuplot.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "results.hpp"

namespace bench {

// Where the chart of `experiment` goes: target/<experiment>.png if target ends in '/' or is a
// directory; otherwise `target` itself for a single experiment, target-<experiment>.png for `all`.
std::string plot_path(const std::string& target, std::string_view experiment, bool many);

// A file that goes with a chart: "dir/elastic.png" with "-trace" and ".csv" gives
// "dir/elastic-trace.csv".
std::string companion_path(const std::string& png_path, std::string_view suffix,
                           std::string_view extension);

// Names and their colours ("#rrggbb"); colour_in gives a name's, or for a name not in the
// table the one colour all such names share.
using colour_table = std::vector<std::pair<std::string_view, std::string_view>>;
std::string colour_in(const colour_table& table, std::string_view name);

// A fixed colour per peer ("#rrggbb"), so a peer looks the same in every chart.
std::string colour_of(const std::string& peer);

// One PNG per experiment: a cluster of bars (one per peer) for each variant and thread count.
// An experiment with more than one unit gets one file per unit (name suffixed with the unit).
// Returns false, with a message on stderr, if gnuplot is missing or fails.
bool plot_experiment(const results& r, std::string_view experiment, const std::string& png_path);

// Samples over time: rows[i][0] is the time in seconds, rows[i][1 + k] the value of series[k].
// Series with on_right set are drawn against the right-hand axis (a queue depth beside thread
// counts). Marks are labelled vertical lines (the phases of a run). The x axis may be another
// quantity (x_label, log_x: requests/s against concurrency), with a point marking each row.
struct line_chart {
  struct series_spec {
    std::string name;
    bool on_right = false;
    bool dashed = false;  // to tell apart lines that often coincide
  };
  std::string title, y_label, y2_label;
  std::string x_label = "time (s)";
  bool log_x = false;
  bool points = false;  // a mark at each row, for charts of a few measured points
  std::vector<series_spec> series;
  std::vector<std::string> colours;  // "#rrggbb" per series, in order; missing: a fixed list
  std::vector<std::vector<double>> rows;
  std::vector<std::pair<double, std::string>> marks;  // (time s, label)
};
// Returns false, with a message on stderr, if gnuplot is missing or fails.
bool plot_lines(const line_chart& chart, const std::string& png_path);

}  // namespace bench
