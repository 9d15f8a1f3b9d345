// measure_point.hpp: the interleaved repeat loop every experiment measures through: the
// contenders of a point, each measurement in a child process of its own (or in this one), and
// the quiet before each.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "results.hpp"

namespace bench {

// Something measured at a point: a peer, or a single-threaded baseline.
struct contender {
  std::string variant;
  std::string peer;
  std::string not_available;    // non-empty: not run, shown as n/a with this reason
  std::function<sample()> run;  // one measurement
  // Measured in the program's own process even by default: for a run that must change state
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
// (the child's check()), 5 otherwise (it crashed, was killed, or sent no whole sample). Every
// measurement runs under the watchdog (watchdog.hpp).
std::vector<row> measure_point(std::string_view experiment, std::string_view label,
                               unsigned threads, const metric& m, std::vector<contender> contenders,
                               int repeat);

// --same-process: measure_point runs every measurement in this process (for gdb and perf, and
// to compare with the figures taken in child processes).
void measure_in_children(bool on);

// Lets threads left spinning by the previous run (TBB's and OpenMP's idle workers spin before
// they sleep; with --same-process they outlive the run) go quiet before the next measurement.
void settle(std::chrono::milliseconds quiet = std::chrono::milliseconds(10));

}  // namespace bench
