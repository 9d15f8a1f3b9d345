// child_measurement.hpp: one measurement in a child process of its own. The runtimes of the
// peers keep worker threads for the life of the process (oneTBB's market, libgomp's team), not
// of the pool object; in one process they outlive their run and slow down the contenders
// measured after them (oneTBB's task_group runs 4x slower at 16 threads once the tbb_arena peer
// has run beside it). A child process takes them with it when it exits.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "results.hpp"

namespace bench {

// How a measurement in a child process ended.
struct child_outcome {
  std::optional<sample> result;  // set only if the child sent a whole sample and exited 0
  int exit_code = 0;             // the child's exit code; -1 if a signal ended it
  std::string failure;           // why there is no result: "exited with code 3", ...
};

// Forks; the child runs `run`, sends its sample back through a pipe and leaves with _exit(0)
// after flushing stdout and stderr (no static destructors: a peer's runtime may still have
// threads). The child dies with spool-bench (PR_SET_PDEATHSIG), so the watchdog's exit, a
// test's timeout or a Ctrl-C never leaves it behind. Returns once the child is reaped.
//
// A fork copies only the calling thread: no peer's runtime may have been started in this
// process before, or the child would find its state but not its threads.
child_outcome run_in_child(const std::function<sample()>& run);

}  // namespace bench
