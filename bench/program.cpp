#include "program.hpp"

#include <chrono>
#include <cstdio>
#include <string>

#include "plot.hpp"
#include "process_stats.hpp"
#include "progress.hpp"
#include "watchdog.hpp"

namespace bench {

namespace {

run_info describe(const run_options& o, const std::string& compared) {
  run_info info;
  info.command_line = o.command_line;
  info.machine = std::to_string(online_cpus()) + " CPUs online, " + cpu_model();
  info.compiler = std::string("g++ ") + __VERSION__;
#ifdef NDEBUG
  info.compiler += ", optimized (NDEBUG)";
#else
  info.compiler += ", assertions on (not NDEBUG): figures are not representative";
#endif
  info.peers = compared;
  return info;
}

void print_header(const run_info& info, const run_options& o) {
  std::printf("# %s\n# machine:  %s\n# compiler: %s\n# peers:    %s\n", info.command_line.c_str(),
              info.machine.c_str(), info.compiler.c_str(), info.peers.c_str());
  std::printf("# sizes:    %s; threads:", o.size == size_mode::tiny
                                              ? "tiny (smoke test, not figures)"
                                          : o.size == size_mode::quick ? "quick"
                                                                       : "full");
  for (unsigned t : o.threads) std::printf(" %u", t);
  std::printf("; repeats: %d\n", o.repeat);
  std::fflush(stdout);
}

void print_line(std::FILE* out, std::string_view name, std::string_view summary,
                const char* suffix) {
  std::fprintf(out, "  %-11.*s %.*s%s\n", static_cast<int>(name.size()), name.data(),
               static_cast<int>(summary.size()), summary.data(), suffix);
}

}  // namespace

void print_experiment_list(std::FILE* out, const char* name, std::string_view summary,
                           const named_summaries& in_all, const named_summaries& alone,
                           const named_summaries& handed_over) {
  std::fprintf(out, "%.*s\n\nusage: %s EXPERIMENT [options]   (%s EXPERIMENT --help)\n\n",
               static_cast<int>(summary.size()), summary.data(), name, name);
  std::fprintf(out, "experiments:\n");
  for (const auto& [n, s] : in_all) print_line(out, n, s, "");
  if (!in_all.empty()) print_line(out, "all", "every experiment above in turn", "");
  for (const auto& [n, s] : alone) print_line(out, n, s, in_all.empty() ? "" : " (not in `all`)");
  for (const auto& [n, s] : handed_over) print_line(out, n, s, " (its own --help)");
}

int run_chosen(const run_options& o, const std::string& compared,
               const std::vector<chosen_run>& runs, bool many) {
  const run_info info = describe(o, compared);
  print_header(info, o);

  // Far above any single measurement's time at that size (a --find-max search included).
  start_watchdog(std::chrono::seconds(o.by_size(1800, 300, 30)));
  const auto start = steady::now();
  results res;
  for (const chosen_run& r : runs) {
    const auto t0 = steady::now();
    progress("%.*s: start", static_cast<int>(r.name.size()), r.name.data());
    r.run(res);
    res.print_table(stdout, r.name);
    progress("%.*s: done in %.1f s", static_cast<int>(r.name.size()), r.name.data(),
             seconds_since(t0));
  }
  std::printf("\n# total %.1f s\n", seconds_since(start));

  bool ok = true;
  if (!o.out_file.empty()) {
    ok = res.write(o.out_file, info) && ok;
    if (ok) std::fprintf(stderr, "%s: wrote %s\n", program_name(), o.out_file.c_str());
  }
  if (!o.plot_target.empty())
    for (const chosen_run& r : runs)
      ok = plot_experiment(res, r.name, plot_path(o.plot_target, r.name, many)) && ok;
  return ok ? 0 : 1;
}

}  // namespace bench
