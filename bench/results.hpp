// results.hpp: what a measurement produces, and how it is shown (table) and kept (CSV, JSON).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bench {

// The figure a row is ranked by.
struct metric {
  std::string name;  // "throughput", "time", ...
  std::string unit;  // "tasks/s", "ms", ...
  bool higher_is_better = true;
};

// One run of one contender: the primary figure and named secondary ones ("p99_us", ...).
struct sample {
  double value = 0;
  std::vector<std::pair<std::string, double>> extras;
};

// Median, minimum and maximum over the repeats.
struct summary {
  double median = 0, min = 0, max = 0;
};
summary summarize(std::vector<double> values);

// One (experiment, variant, peer, threads) point with its samples, or why it was not run.
struct row {
  std::string experiment;
  std::string variant;
  std::string peer;
  unsigned threads = 0;
  metric m;
  std::string not_available;  // non-empty: shown as "n/a" with this reason
  std::vector<sample> samples;
  // Figures computed from medians after the runs (e.g. speedup over std::sort).
  std::vector<std::pair<std::string, double>> derived;
  // A reference measured beside the peers that is not a pool (fib's ideal schedule): shown
  // without a ratio against spool.
  bool reference = false;

  bool ran() const { return not_available.empty() && !samples.empty(); }
  summary value() const;
  std::optional<summary> extra(std::string_view name) const;
  std::vector<std::string> extra_names() const;
};

// Context printed in the header and stored with the figures.
struct run_info {
  std::string command_line;
  std::string machine;   // "2 CPUs, AMD EPYC ..."
  std::string compiler;  // "g++ 12.2.0, -O3"
  std::string peers;     // library versions
};

class results {
 public:
  void add(std::vector<row> rows);
  const std::vector<row>& rows() const { return rows_; }

  // spool's median over this row's median, oriented so that > 1 means spool is ahead:
  // spool/peer for higher-is-better metrics, peer/spool for times, latencies and CPU.
  // Empty for spool's own rows, n/a rows, and rows whose point has no spool row.
  std::optional<double> ratio_vs_spool(const row& r) const;

  void print_table(std::FILE* out, std::string_view experiment) const;
  // Writes .csv or .json, chosen by the file name's extension; false (with a message on
  // stderr) if the file cannot be written.
  bool write(const std::string& path, const run_info& info) const;

 private:
  bool write_csv(std::FILE* f) const;
  bool write_json(std::FILE* f, const run_info& info) const;
  std::vector<row> rows_;
};

// "5.12M", "830k", "12.3": compact, with 3-4 significant digits.
std::string human(double v);

}  // namespace bench
