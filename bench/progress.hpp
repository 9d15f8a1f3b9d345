// progress.hpp: what a benchmark program says while it runs (progress lines on stderr, timed
// from the program's start, and its name before every message), the clock the experiments
// read, and the result check that stops a run.
#pragma once

#include <chrono>
#include <string>

namespace bench {

using steady = std::chrono::steady_clock;
inline double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

// The program's name ("spool-bench", "spool-load-bench"), which every message on stderr starts
// with; set once, first thing in main().
void set_program_name(const char* name);
const char* program_name();

// A line on stderr, prefixed with the time since the program started.
void progress(const char* format, ...) __attribute__((format(printf, 1, 2)));

// A result that is wrong (unsorted array, lost tasks) makes every figure meaningless: stop.
void check(bool ok, const std::string& what);

}  // namespace bench
