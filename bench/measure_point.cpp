#include "measure_point.hpp"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "child_measurement.hpp"
#include "progress.hpp"
#include "watchdog.hpp"

namespace bench {

namespace {

bool in_children = true;  // measure_in_children()

// The measurement from a child process, or the end of the program with a message.
sample measured_in_child(const std::string& what, const std::function<sample()>& run) {
  child_outcome out = run_in_child([&] {
    forget_watchdog_after_fork();
    return run();
  });
  if (out.result) return std::move(*out.result);
  std::fprintf(stderr, "%s: %s: the measurement's child process %s%s\n", program_name(),
               what.c_str(), out.failure.c_str(),
               out.exit_code == 3 ? " (a result check failed)" : "");
  std::exit(out.exit_code == 3 ? 3 : 5);
}

}  // namespace

void measure_in_children(bool on) { in_children = on; }

contender not_available(std::string variant, std::string_view peer, std::string_view why) {
  return contender{std::move(variant), std::string(peer), std::string(why), {}};
}

std::vector<row> measure_point(std::string_view experiment, std::string_view label,
                               unsigned threads, const metric& m, std::vector<contender> contenders,
                               int repeat) {
  std::vector<row> rows;
  for (const contender& c : contenders) {
    const unsigned t = c.threads != 0 ? c.threads : threads;
    rows.push_back(row{std::string(experiment), c.variant, c.peer, t, m, c.not_available, {}, {}});
  }
  for (int rep = 1; rep <= repeat; ++rep) {
    progress("%.*s %.*s threads=%u: repeat %d/%d", static_cast<int>(experiment.size()),
             experiment.data(), static_cast<int>(label.size()), label.data(), threads, rep, repeat);
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      const contender& c = contenders[i];
      if (!c.not_available.empty()) continue;
      const std::string what = std::string(experiment) + " '" + c.variant + "' on " + c.peer +
                               " with " + std::to_string(rows[i].threads) + " threads";
      watched(what, [&] {
        rows[i].samples.push_back(in_children && !c.in_process ? measured_in_child(what, c.run)
                                                               : c.run());
      });
    }
  }
  return rows;
}

void settle(std::chrono::milliseconds quiet) { std::this_thread::sleep_for(quiet); }

}  // namespace bench
