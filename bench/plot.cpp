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

// A fixed colour per peer, so a peer looks the same in every chart.
std::string colour_of(const std::string& peer) {
  static const std::pair<const char*, const char*> colours[] = {{"spool", "#d62728"},
                                                                {"tbb_task_group", "#1f77b4"},
                                                                {"tbb_arena", "#17becf"},
                                                                {"asio", "#2ca02c"},
                                                                {"omp", "#ff7f0e"},
                                                                {"mutex_pool", "#7f7f7f"},
                                                                {"serial quicksort", "#9467bd"},
                                                                {"std::sort", "#8c564b"},
                                                                {"serial fib", "#9467bd"}};
  for (const auto& [name, colour] : colours)
    if (peer == name) return colour;
  return "#bcbd22";
}

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

bool run_gnuplot(const std::string& script, const std::string& path) {
  std::FILE* gp = popen("gnuplot", "w");
  if (gp == nullptr) {
    std::fprintf(stderr, "spool-bench: --plot: cannot start gnuplot\n");
    return false;
  }
  const bool written = std::fputs(script.c_str(), gp) >= 0;
  const int status = pclose(gp);
  if (!written || status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "spool-bench: --plot: gnuplot failed to draw %s (is gnuplot installed?)\n",
                 path.c_str());
    return false;
  }
  std::fprintf(stderr, "spool-bench: wrote %s\n", path.c_str());
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
  std::string script;
  script += "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n";
  script += "  set terminal pngcairo size 1200,650 noenhanced\n";
  script += "} else {\n";
  script += "  set terminal png size 1200,650 noenhanced\n";
  script += "}\n";
  script += "set output " + gnuplot_quoted(path) + "\n";
  script += "set title " + gnuplot_quoted(title) + "\n";
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
  if (!many) return target;
  struct stat st {};
  const bool dir = (!target.empty() && target.back() == '/') ||
                   (stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
  if (dir) {
    if (target.back() == '/' && mkdir(target.c_str(), 0777) != 0 && errno != EEXIST)
      std::fprintf(stderr, "spool-bench: --plot: cannot create %s: %s\n", target.c_str(),
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

}  // namespace bench
