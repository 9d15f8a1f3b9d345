// options.hpp: spool-bench's command line: the options every experiment reads, the
// experiments' own parameters, and the subcommand an experiment is.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
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
  bool tls = false;                           // http --tls: over TLS (experiments/http_tls.cpp)
  std::vector<std::string> spoold_models;     // spoold --model values; empty: its default
  std::string spoold_path, site_root, url_path;
  // cluster: the fleet sizes behind the balancers, which balancers ("haproxy", "nginx"), and
  // the failovers timed per number of replicas.
  std::vector<std::uint64_t> fleet_nodes;
  std::vector<std::string> balancers;
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

// "200k", "10M": for variant labels.
std::string count_label(std::uint64_t n);

}  // namespace bench
