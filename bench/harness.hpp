// harness.hpp: what every experiment shares: the options, the interleaved repeat loop, progress
// lines, result checks and clocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "results.hpp"

namespace bench {

enum class size_mode { full, quick, tiny };

struct options {
  std::string command_line;
  std::string subcommand;
  size_mode size = size_mode::full;
  int repeat = 5;
  bool repeat_given = false;
  std::vector<unsigned> threads{2};
  std::vector<std::string> peers;  // empty: every peer
  std::string out_file;
  std::string plot_target;
  // spool's config::spin_rounds for every spool pool of the run; unset: the library's default.
  std::optional<unsigned> spin_rounds;
  // spool's config::defer_period, in microseconds, for every spool pool; unset: the default.
  std::optional<unsigned> defer_period_us;
  bool same_process = false;  // --same-process: see measure_in_children()

  // Experiment parameters; unset means the experiment's default for the size mode.
  std::vector<std::uint64_t> n;
  std::optional<std::uint64_t> cutoff, tasks;
  std::optional<double> rate, recv_rate, duration_s, probe_s, long_ms, short_ms;
  std::vector<double> ticks_ms;
  bool find_max = false;
  // elastic: the mixed workload and the elastic pool's bounds and keep-alive.
  std::optional<double> io_ms, io_ratio, keep_alive_ms;
  std::optional<std::uint64_t> pool_max_threads, primes_below;
  std::string trace_file;  // empty: the default place (see the elastic experiment's help)
  // http: the load (wrk's connections, the Connection header), which servers, what they serve.
  std::vector<std::uint64_t> concurrency;
  std::vector<std::string> connection_modes;  // "keepalive", "close"
  std::vector<std::string> servers;           // "spoold", "nginx"
  std::vector<std::string> spoold_models;     // spoold --model values; empty: its default
  std::string spoold_path, site_root, url_path;
  // cluster: the fleet sizes behind HAProxy, and the failovers timed per store setting.
  std::vector<std::uint64_t> fleet_nodes;
  std::optional<std::uint64_t> failovers;
  std::string store_spec;  // http --store: "redis", or a spoold --store spec; "" for the default
  // siege: repetitions per user in the one-shot form (-r), which forms, the paper's "original".
  std::optional<std::uint64_t> reps;
  std::vector<std::string> siege_forms;  // "reps", "time"
  std::string original_model;            // spoold --model for the original server

  template <class T>
  T by_size(T full, T quick, T tiny) const {
    return size == size_mode::tiny ? tiny : size == size_mode::quick ? quick : full;
  }
  bool wants_peer(std::string_view name) const;
  unsigned max_threads() const;
  // pc and idle measure over seconds per run; under --quick they repeat 3 times unless
  // --repeat is given, so that `all --quick` stays within 5 minutes on 2 cores.
  int repeat_time_bound() const;
};

// One subcommand.
struct experiment {
  std::string_view name;
  std::string_view summary;              // one line, for the list
  std::string_view help;                 // its parameters, defaults and metric
  std::vector<std::string_view> params;  // the experiment-specific flags it accepts
  void (*run)(const options&, results&);
};

// Parses argv[2..] for `exp` (nullptr: `all`, which takes no experiment-specific flags).
// Exits with a message on a bad option.
options parse_options(int argc, char** argv, const experiment* exp);
void print_common_help(std::FILE* out);

// Something measured at a point: a peer, or a single-threaded baseline.
struct contender {
  std::string variant;
  std::string peer;
  std::string not_available;    // non-empty: not run, shown as n/a with this reason
  std::function<sample()> run;  // one measurement
  // Measured in spool-bench's own process even by default: for a run that must change state
  // the caller keeps (see server_contenders), and that starts no peer's runtime here.
  bool in_process = false;
  // The pool size this contender measures, when a point holds several (0: the point's own).
  unsigned threads = 0;
};
contender not_available(std::string variant, std::string_view peer, std::string_view why);

// Runs every contender `repeat` times, interleaved (each repeat runs all of them in turn), so
// that drift in a shared machine's load hits all alike. `label` names the point in progress lines.
// Each measurement runs in a child process of its own (child_measurement.hpp) unless
// measure_in_children(false) was called or the contender is in_process. A child that fails
// ends the program with a message naming the measurement: exit code 3 if a result check failed
// (the child's check()), 5 otherwise (it crashed, was killed, or sent no whole sample).
std::vector<row> measure_point(std::string_view experiment, std::string_view label,
                               unsigned threads, const metric& m, std::vector<contender> contenders,
                               int repeat);

// --same-process: measure_point runs every measurement in this process (for gdb and perf, and
// to compare with the figures taken in child processes).
void measure_in_children(bool on);

// From then on, a single measurement that runs longer than `limit` ends the program with a
// message naming it, instead of hanging (a deadlock or lost wake-up in a pool). A measurement
// in a child process is timed by this process's watchdog, and dies with the program.
void start_watchdog(std::chrono::seconds limit);
// Runs `body` under the watchdog, as measure_point runs each measurement; `what` names it.
void watched(const std::string& what, const std::function<void()>& body);

// A line on stderr, prefixed with the time since the program started.
void progress(const char* format, ...) __attribute__((format(printf, 1, 2)));

// A result that is wrong (unsorted array, lost tasks) makes every figure meaningless: stop.
void check(bool ok, const std::string& what);

using steady = std::chrono::steady_clock;
inline double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

// Lets threads left spinning by the previous run (TBB's and OpenMP's idle workers spin before
// they sleep; with --same-process they outlive the run) go quiet before the next measurement.
void settle(std::chrono::milliseconds quiet = std::chrono::milliseconds(10));

// "200k", "10M": for variant labels.
std::string count_label(std::uint64_t n);

}  // namespace bench
