// options.hpp: spool-bench's command line: the run options (run_options.hpp), spool-bench's
// own (the peers, spool's pool settings, child processes) and the pool experiments' parameters.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "run_options.hpp"

namespace bench {

struct options : run_options {
  std::vector<std::string> peers;  // empty: every peer
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

  bool wants_peer(std::string_view name) const;
};

// One subcommand of spool-bench.
using experiment = experiment_of<options>;

// Parses argv[2..] for `exp` (nullptr: `all`, which takes no experiment-specific flags).
// Exits with a message on a bad option.
options parse_options(int argc, char** argv, const experiment* exp);
// spool-bench's options, for --help.
void print_options_help(std::FILE* out);

}  // namespace bench
