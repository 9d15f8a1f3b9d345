// program.hpp: the main() of a benchmark program: the subcommand chosen by name, its options
// parsed, the header (command line, machine, compiler, what is compared), the watchdog, the
// runs with a table each, and the results written and drawn.
#pragma once

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "progress.hpp"
#include "results.hpp"
#include "run_options.hpp"

namespace bench {

// A subcommand that is a program of its own, with its own options and output: main() hands
// argv over to it, and nothing of run_program's (options, header, tables) applies.
struct handover {
  std::string_view name;
  std::string_view summary;
  int (*run)(int argc, char** argv);
};

// What a program's main() hands over: its name, its experiments, and what it adds to the run.
template <class Options>
struct program {
  using experiment = experiment_of<Options>;
  const char* name;
  std::string_view summary;  // what it measures, first in its --help
  // `all` runs these in turn (none: the program has no `all`); the rest run only when named.
  std::vector<const experiment*> in_all;
  std::vector<const experiment*> standalone;
  // argv parsed for `exp` (nullptr: `all`).
  Options (*parse)(int argc, char** argv, const experiment* exp);
  // The program's options after the list of experiments.
  void (*print_options_help)(std::FILE* out);
  // The header's "compared" line: library versions, or the programs measured.
  std::string (*compared)(const Options& o);
  // Called once the options are parsed, before the first experiment (may be null).
  void (*configure)(const Options& o) = nullptr;
  std::vector<handover> handovers = {};
};

// One chosen experiment, its options already bound.
struct chosen_run {
  std::string_view name;
  std::function<void(results&)> run;
};

// The part of main() that does not depend on the options' type: header, watchdog, the runs,
// --out and --plot. `many`: `all` was asked for. Returns the exit code.
int run_chosen(const run_options& o, const std::string& compared,
               const std::vector<chosen_run>& runs, bool many);

// "usage: NAME EXPERIMENT [options]" and the list of experiments, one line each: those of
// `all`, then those run alone, then the programs handed over to.
using named_summaries = std::vector<std::pair<std::string_view, std::string_view>>;
void print_experiment_list(std::FILE* out, const char* name, std::string_view summary,
                           const named_summaries& in_all, const named_summaries& alone,
                           const named_summaries& handed_over);

template <class Options>
int run_program(const program<Options>& p, int argc, char** argv) {
  set_program_name(p.name);
  const auto list = [&](std::FILE* out) {
    named_summaries in_all, alone, handed_over;
    for (const auto* e : p.in_all) in_all.emplace_back(e->name, e->summary);
    for (const auto* e : p.standalone) alone.emplace_back(e->name, e->summary);
    for (const handover& h : p.handovers) handed_over.emplace_back(h.name, h.summary);
    print_experiment_list(out, p.name, p.summary, in_all, alone, handed_over);
    p.print_options_help(out);
  };
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    list(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const handover& h : p.handovers)
    if (h.name == name) return h.run(argc, argv);
  const bool many = name == "all" && !p.in_all.empty();
  std::vector<const experiment_of<Options>*> chosen;
  for (const auto* e : p.in_all)
    if (many || e->name == name) chosen.push_back(e);
  for (const auto* e : p.standalone)
    if (e->name == name) chosen.push_back(e);
  if (chosen.empty()) {
    std::fprintf(stderr, "%s: unknown experiment '%s'\n\n", p.name, name.c_str());
    list(stderr);
    return 2;
  }
  const Options o = p.parse(argc, argv, many ? nullptr : chosen.front());
  if (p.configure != nullptr) p.configure(o);
  std::vector<chosen_run> runs;
  for (const auto* e : chosen) runs.push_back({e->name, [e, &o](results& res) { e->run(o, res); }});
  return run_chosen(o, p.compared(o), runs, many);
}

}  // namespace bench
