#include "plot.hpp"

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "progress.hpp"

namespace bench {

namespace {

std::string gnuplot_quoted(std::string_view s) {  // single-quoted: '' stands for '
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string unit_suffixed(const std::string& path, const std::string& unit) {
  std::string tag;
  for (char c : unit) tag += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  const auto dot = path.rfind(".png");
  return dot == std::string::npos ? path + "-" + tag : path.substr(0, dot) + "-" + tag + ".png";
}

template <class T>
std::size_t index_of(std::vector<T>& list, const T& item) {
  auto it = std::find(list.begin(), list.end(), item);
  if (it != list.end()) return static_cast<std::size_t>(it - list.begin());
  list.push_back(item);
  return list.size() - 1;
}

// Tab-separated: a header of peer names, then one line per variant/threads cluster; '?' marks
// a peer that has no figure there (n/a).
std::string datablock(const std::vector<const row*>& rows) {
  std::vector<std::string> clusters, peers;
  for (const row* r : rows) {
    index_of(clusters, r->variant + " t=" + std::to_string(r->threads));
    index_of(peers, r->peer);
  }
  std::vector<std::vector<std::string>> cell(clusters.size(),
                                             std::vector<std::string>(peers.size(), "?"));
  for (const row* r : rows) {
    char value[32];
    std::snprintf(value, sizeof value, "%.6g", r->value().median);
    cell[index_of(clusters, r->variant + " t=" + std::to_string(r->threads))]
        [index_of(peers, r->peer)] = value;
  }
  std::string data = "cluster";
  for (const std::string& p : peers) data += "\t" + p;
  data += "\n";
  for (std::size_t c = 0; c < clusters.size(); ++c) {
    data += clusters[c];
    for (const std::string& v : cell[c]) data += "\t" + v;
    data += "\n";
  }
  return data;
}

}  // namespace

std::string colour_in(const colour_table& table, std::string_view name) {
  for (const auto& [n, colour] : table)
    if (name == n) return std::string(colour);
  return "#bcbd22";
}

std::string colour_of(const std::string& peer) {
  static const colour_table colours{{"spool", "#d62728"},
                                    {"tbb_task_group", "#1f77b4"},
                                    {"tbb_arena", "#17becf"},
                                    {"asio", "#2ca02c"},
                                    {"omp", "#ff7f0e"},
                                    {"mutex_pool", "#7f7f7f"},
                                    {"spool (no hint)", "#f08080"},
                                    {"spool (fixed)", "#8b0000"},
                                    {"serial quicksort", "#9467bd"},
                                    {"std::sort", "#8c564b"},
                                    {"serial fib", "#9467bd"},
                                    {"spoold", "#d62728"},
                                    {"nginx", "#2ca02c"}};
  return colour_in(colours, peer);
}

namespace {

// One clause per peer column, in the datablock's column order.
std::string plot_clauses(const std::vector<const row*>& rows) {
  std::vector<std::string> peers;
  for (const row* r : rows) index_of(peers, r->peer);
  std::string clauses;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const std::string column = std::to_string(i + 2);
    clauses += (i ? ", " : "") + std::string("$data using ") + column + (i ? "" : ":xtic(1)") +
               " title columnheader(" + column + ") lc rgb '" + colour_of(peers[i]) + "'";
  }
  return clauses;
}

// The terminal (pngcairo where gnuplot has it), the output file and the title.
std::string png_preamble(const std::string& path, const std::string& title) {
  std::string script;
  script += "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n";
  script += "  set terminal pngcairo size 1200,650 noenhanced\n";
  script += "} else {\n";
  script += "  set terminal png size 1200,650 noenhanced\n";
  script += "}\n";
  script += "set output " + gnuplot_quoted(path) + "\n";
  script += "set title " + gnuplot_quoted(title) + "\n";
  return script;
}

bool run_gnuplot(const std::string& script, const std::string& path) {
  std::FILE* gp = popen("gnuplot", "w");
  if (gp == nullptr) {
    std::fprintf(stderr, "%s: --plot: cannot start gnuplot\n", program_name());
    return false;
  }
  const bool written = std::fputs(script.c_str(), gp) >= 0;
  const int status = pclose(gp);
  if (!written || status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s: --plot: gnuplot failed to draw %s (is gnuplot installed?)\n",
                 program_name(), path.c_str());
    return false;
  }
  std::fprintf(stderr, "%s: wrote %s\n", program_name(), path.c_str());
  return true;
}

// Figures that span more than two decades (idle CPU from 1e-5 to 1 core, a latency outlier)
// get a log scale, or the small bars would vanish.
bool wants_log_scale(const std::vector<const row*>& rows) {
  double lo = INFINITY, hi = 0;
  for (const row* r : rows) {
    const double v = r->value().median;
    if (v <= 0) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  return hi > 0 && hi / lo > 100;
}

bool plot_unit(const std::vector<const row*>& rows, std::string_view experiment,
               const std::string& path) {
  const row& first = *rows.front();
  const bool log_scale = wants_log_scale(rows);
  const std::string title = std::string(experiment) + ": " + first.m.name + " (" + first.m.unit +
                            "), median of " + std::to_string(first.samples.size()) + ", " +
                            (first.m.higher_is_better ? "higher" : "lower") + " is better" +
                            (log_scale ? ", log scale" : "");
  std::string script = png_preamble(path, title);
  script += "set ylabel " + gnuplot_quoted(first.m.unit) + "\n";
  script += "set style data histograms\n";
  script += "set style histogram clustered gap 1\n";
  script += "set style fill solid 0.85 border -1\n";
  script += "set datafile separator \"\\t\"\n";
  script += "set datafile missing '?'\n";
  script += "set key outside right top\n";
  script += "set grid ytics\n";
  script += log_scale ? "set logscale y\n" : "set yrange [0:*]\n";
  script += "set xtics rotate by -20 nomirror\n";
  script += "$data << EOD\n" + datablock(rows) + "EOD\n";
  script += "plot " + plot_clauses(rows) + "\n";
  return run_gnuplot(script, path);
}

}  // namespace

std::string plot_path(const std::string& target, std::string_view experiment, bool many) {
  struct stat st {};
  const bool dir = (!target.empty() && target.back() == '/') ||
                   (stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
  if (!dir && !many) return target;
  if (dir) {
    if (target.back() == '/' && mkdir(target.c_str(), 0777) != 0 && errno != EEXIST)
      std::fprintf(stderr, "%s: --plot: cannot create %s: %s\n", program_name(), target.c_str(),
                   std::strerror(errno));
    return target + (target.back() == '/' ? "" : "/") + std::string(experiment) + ".png";
  }
  return target + "-" + std::string(experiment) + ".png";
}

bool plot_experiment(const results& r, std::string_view experiment, const std::string& png_path) {
  std::vector<std::string> units;
  for (const row& x : r.rows())
    if (x.experiment == experiment && x.ran()) index_of(units, x.m.unit);
  bool ok = true;
  for (const std::string& unit : units) {
    std::vector<const row*> rows;
    for (const row& x : r.rows())
      if (x.experiment == experiment && x.ran() && x.m.unit == unit) rows.push_back(&x);
    ok = plot_unit(rows, experiment, units.size() > 1 ? unit_suffixed(png_path, unit) : png_path) &&
         ok;
  }
  return ok;
}

std::string companion_path(const std::string& png_path, std::string_view suffix,
                           std::string_view extension) {
  const std::string png = ".png";
  const bool has_png = png_path.size() >= png.size() &&
                       png_path.compare(png_path.size() - png.size(), png.size(), png) == 0;
  const std::string stem = has_png ? png_path.substr(0, png_path.size() - png.size()) : png_path;
  return stem + std::string(suffix) + std::string(extension);
}

namespace {

// Tab-separated: a header naming the columns, then one line per sample.
std::string line_datablock(const line_chart& chart) {
  std::string data = "time_s";
  for (const auto& s : chart.series) data += "\t" + s.name;
  data += "\n";
  for (const auto& values : chart.rows) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      char value[32];
      std::snprintf(value, sizeof value, "%.6g", values[i]);
      data += (i ? "\t" : "") + std::string(value);
    }
    data += "\n";
  }
  return data;
}

std::string line_clauses(const line_chart& chart) {
  static const char* const colours[] = {"#d62728", "#1f77b4", "#ff7f0e", "#7f7f7f",
                                        "#2ca02c", "#9467bd", "#8c564b"};
  std::string clauses;
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const std::string column = std::to_string(i + 2);
    clauses += (i ? ", " : "") + std::string("$data using 1:") + column +
               (chart.series[i].on_right ? " axes x1y2" : "") + " title columnheader(" + column +
               ") with " + (chart.points ? "linespoints pt 7" : "lines") + " lw 2 lc rgb '" +
               (i < chart.colours.size() ? chart.colours[i]
                                         : std::string(colours[i % std::size(colours)])) +
               "'" + (chart.series[i].dashed ? " dt 2" : "");
  }
  return clauses;
}

// "[0:top]" with a tenth of headroom, so that a line at the maximum stays off the frame.
std::string range_to_max(const line_chart& chart, bool right) {
  double top = 0;
  for (const auto& values : chart.rows)
    for (std::size_t i = 0; i < chart.series.size() && i + 1 < values.size(); ++i)
      if (chart.series[i].on_right == right) top = std::max(top, values[i + 1]);
  char range[48];
  std::snprintf(range, sizeof range, "[0:%.6g]", top > 0 ? top * 1.1 : 1.0);
  return range;
}

}  // namespace

bool plot_lines(const line_chart& chart, const std::string& png_path) {
  if (chart.rows.empty() || chart.series.empty()) {
    std::fprintf(stderr, "%s: --plot: nothing to draw in %s\n", program_name(), png_path.c_str());
    return false;
  }
  const bool right_axis = std::any_of(chart.series.begin(), chart.series.end(),
                                      [](const auto& s) { return s.on_right; });
  std::string script = png_preamble(png_path, chart.title);
  script += "set xlabel " + gnuplot_quoted(chart.x_label) + "\n";
  script += "set autoscale xfix\n";
  if (chart.log_x) script += "set logscale x\nset offsets graph 0.05, graph 0.05, 0, 0\n";
  script += "set ylabel " + gnuplot_quoted(chart.y_label) + "\n";
  script += "set yrange " + range_to_max(chart, false) + "\n";
  if (right_axis) {
    script += "set y2label " + gnuplot_quoted(chart.y2_label) + "\n";
    script += "set ytics nomirror\nset y2tics\n";
    script += "set y2range " + range_to_max(chart, true) + "\n";
  }
  script += "set datafile separator \"\\t\"\n";
  script += "set key below horizontal\n";
  script += "set grid xtics ytics\n";
  for (std::size_t i = 0; i < chart.marks.size(); ++i) {
    char at[32];
    std::snprintf(at, sizeof at, "%.6g", chart.marks[i].first);
    script += "set arrow from " + std::string(at) + ", graph 0 to " + at +
              ", graph 1 nohead dt 2 lc rgb '#555555'\n";
    // Alternate rows, so that the labels of marks close together do not overprint.
    script += "set label " + gnuplot_quoted(chart.marks[i].second) + " at " + at +
              ", graph 1 offset 0.4," + (i % 2 ? "-2" : "-1") + " left textcolor rgb '#555555'\n";
  }
  script += "$data << EOD\n" + line_datablock(chart) + "EOD\n";
  script += "plot " + line_clauses(chart) + "\n";
  return run_gnuplot(script, png_path);
}

}  // namespace bench
