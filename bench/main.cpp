// spool-bench: the source documents' pool experiments, run on spool and on the established
// pools in the same run, each measurement in a child process of its own. `spool-bench --help`
// lists the experiments; bench/README.md says how each is measured.
#include <omp.h>
#include <oneapi/tbb/version.h>
#include <boost/version.hpp>

#include <cstdio>
#include <cstring>
#include <string>

#include "experiments/experiments.hpp"
#include "measure_point.hpp"
#include "options.hpp"
#include "peers/spool_peer.hpp"
#include "plot.hpp"
#include "process_stats.hpp"
#include "progress.hpp"
#include "results.hpp"
#include "watchdog.hpp"

namespace {

using namespace bench;

run_info describe(const options& o) {
  run_info info;
  info.command_line = o.command_line;
  info.machine = std::to_string(online_cpus()) + " CPUs online, " + cpu_model();
  info.compiler = std::string("g++ ") + __VERSION__;
#ifdef NDEBUG
  info.compiler += ", optimized (NDEBUG)";
#else
  info.compiler += ", assertions on (not NDEBUG): figures are not representative";
#endif
  info.peers = std::string("oneTBB ") + TBB_VERSION_STRING + ", Boost.Asio (Boost " +
               std::to_string(BOOST_VERSION / 100000) + "." +
               std::to_string(BOOST_VERSION / 100 % 1000) + "), OpenMP " + std::to_string(_OPENMP) +
               " (libgomp), mutex_pool (bench/peers)";
  return info;
}

void print_header(const run_info& info, const options& o) {
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

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: spool-bench EXPERIMENT [options]   (spool-bench EXPERIMENT "
               "--help)\n\nexperiments:\n");
  for (const experiment* e : all_experiments())
    std::fprintf(out, "  %-11.*s %.*s\n", static_cast<int>(e->name.size()), e->name.data(),
                 static_cast<int>(e->summary.size()), e->summary.data());
  std::fprintf(out, "  %-11s %s\n", "all", "every experiment above in turn");
  for (const experiment* e : standalone_experiments())
    std::fprintf(out, "  %-11.*s %.*s (not in `all`)\n", static_cast<int>(e->name.size()),
                 e->name.data(), static_cast<int>(e->summary.size()), e->summary.data());
  print_common_help(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  std::vector<const experiment*> chosen;
  for (const experiment* e : all_experiments())
    if (name == "all" || e->name == name) chosen.push_back(e);
  for (const experiment* e : standalone_experiments())
    if (e->name == name) chosen.push_back(e);
  if (chosen.empty()) {
    std::fprintf(stderr, "spool-bench: unknown experiment '%s'\n\n", name.c_str());
    print_usage(stderr);
    return 2;
  }
  const bool many = name == "all";
  const options o = parse_options(argc, argv, many ? nullptr : chosen.front());
  if (o.spin_rounds) spool_peer::spin_rounds = *o.spin_rounds;
  if (o.defer_period_us) {
    spool_peer::defer_period = std::chrono::microseconds(*o.defer_period_us);
  }
  measure_in_children(!o.same_process);
  const run_info info = describe(o);
  print_header(info, o);

  // Far above any single measurement's time at that size (a --find-max search included).
  start_watchdog(std::chrono::seconds(o.by_size(1800, 300, 30)));
  const auto start = steady::now();
  results res;
  for (const experiment* e : chosen) {
    const auto t0 = steady::now();
    progress("%.*s: start", static_cast<int>(e->name.size()), e->name.data());
    e->run(o, res);
    res.print_table(stdout, e->name);
    progress("%.*s: done in %.1f s", static_cast<int>(e->name.size()), e->name.data(),
             seconds_since(t0));
  }
  std::printf("\n# total %.1f s\n", seconds_since(start));

  bool ok = true;
  if (!o.out_file.empty()) {
    ok = res.write(o.out_file, info) && ok;
    if (ok) std::fprintf(stderr, "spool-bench: wrote %s\n", o.out_file.c_str());
  }
  if (!o.plot_target.empty())
    for (const experiment* e : chosen)
      ok = plot_experiment(res, e->name, plot_path(o.plot_target, e->name, many)) && ok;
  return ok ? 0 : 1;
}
