// run_options.hpp: what every run of a benchmark program takes on its command line (sizes,
// repeats, threads, where the results go), the parsing both programs share, and the
// subcommand an experiment is. Each program adds its own options and its experiments'
// parameters (options.hpp for spool-bench, load/load_options.hpp for spool-load-bench).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "results.hpp"

namespace bench {

enum class size_mode { full, quick, tiny };

struct run_options {
  std::string command_line;
  std::string subcommand;
  size_mode size = size_mode::full;
  int repeat = 5;
  bool repeat_given = false;
  std::vector<unsigned> threads{2};
  std::string out_file;
  std::string plot_target;

  template <class T>
  T by_size(T full, T quick, T tiny) const {
    return size == size_mode::tiny ? tiny : size == size_mode::quick ? quick : full;
  }
  unsigned max_threads() const;
  // pc and idle measure over seconds per run; under --quick they repeat 3 times unless
  // --repeat is given, so that `all --quick` stays within 5 minutes on 2 cores.
  int repeat_time_bound() const;
};

// One subcommand of a program whose experiments read `Options` (run_options and the program's
// own parameters).
template <class Options>
struct experiment_of {
  std::string_view name;
  std::string_view summary;              // one line, for the list
  std::string_view help;                 // its parameters, defaults and metric
  std::vector<std::string_view> params;  // the experiment-specific flags it accepts
  void (*run)(const Options&, results&);

  bool takes(std::string_view flag) const {
    for (std::string_view p : params)
      if (p == flag) return true;
    return false;
  }
};

// An experiment's --help: "usage: PROGRAM NAME [options]", its summary and its help (the
// program's options follow).
void print_experiment_help(std::string_view name, std::string_view summary, std::string_view help);
template <class Options>
void print_experiment_help(const experiment_of<Options>& e) {
  print_experiment_help(e.name, e.summary, e.help);
}

// Ends the program: "PROGRAM SUBCOMMAND: WHAT (see PROGRAM SUBCOMMAND --help)", exit code 2.
[[noreturn]] void usage_error(const run_options& o, const std::string& what);
// A non-negative number ("1e8" too), or a usage error naming `flag`.
double parse_number(const run_options& o, std::string_view flag, const std::string& text);
// A whole non-negative number, or a usage error naming `flag`.
std::uint64_t parse_count(const run_options& o, std::string_view flag, const std::string& text);
// "a,b,c" -> {"a", "b", "c"}.
std::vector<std::string> split(const std::string& text);

// A flag that is not a run option, offered to the program: `value()` reads the flag's value
// (after '=', else the next argument; a usage error if there is none). Returns false for a flag
// the program (or the chosen experiment) does not take.
using flag_handler =
    std::function<bool(const std::string& flag, const std::function<std::string()>& value)>;

// Parses argv[2..] into `o`: the run options here, every other flag offered to `own`. --help
// calls `help` and exits 0. `all` (one_experiment false) takes only options, no experiment's
// parameter, and says so when given one.
void parse_run_options(int argc, char** argv, run_options& o, bool one_experiment,
                       const flag_handler& own, const std::function<void()>& help);

// The run options' lines of --help; `threads` and `quick` say what --threads and --quick mean
// in this program, `has_all` whether it has `all`.
void print_run_options_help(std::FILE* out, std::string_view threads, std::string_view quick,
                            bool has_all);

// "200k", "10M": for variant labels.
std::string count_label(std::uint64_t n);

}  // namespace bench
