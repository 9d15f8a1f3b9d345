// load_options.hpp: spool-load-bench's command line: the run options (run_options.hpp) and the
// load experiments' parameters: the load (wrk's or siege's), the servers and what they serve,
// the fleet's sizes and balancers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "run_options.hpp"

namespace bench {

struct load_options : run_options {
  // Experiment parameters; unset or empty means the experiment's default for the size mode.
  std::optional<double> duration_s;
  // http: the load (wrk's connections, the Connection header), which servers, what they serve.
  std::vector<std::uint64_t> concurrency;
  std::vector<std::string> connection_modes;  // "keepalive", "close"
  std::vector<std::string> servers;           // "spoold", "nginx"
  bool tls = false;                           // http --tls: over TLS (experiments/http_tls.cpp)
  std::vector<std::string> spoold_models;     // spoold --model values; empty: its default
  std::string spoold_path, site_root, url_path;
  std::string spoold_b_path;  // http --tls --spoold-b: a second spoold binary, "spoold-b"
  std::string store_spec;     // http --store: "redis", or a spoold --store spec; "" for the default
  // cluster: the fleet sizes behind the balancers, which balancers ("haproxy", "nginx"), and
  // the failovers timed per number of replicas.
  std::vector<std::uint64_t> fleet_nodes;
  std::vector<std::string> balancers;
  std::optional<std::uint64_t> failovers;
  // siege: repetitions per user in the one-shot form (-r), which forms, the paper's "original".
  std::optional<std::uint64_t> reps;
  std::vector<std::string> siege_forms;  // "reps", "time"
  std::string original_model;            // spoold --model for the original server
};

// One subcommand of spool-load-bench.
using experiment = experiment_of<load_options>;

// Parses argv[2..] for `exp`. Exits with a message on a bad option.
load_options parse_load_options(int argc, char** argv, const experiment* exp);
// spool-load-bench's options, for --help.
void print_load_options_help(std::FILE* out);

}  // namespace bench
