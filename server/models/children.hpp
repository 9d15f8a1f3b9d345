// The end of a model with child processes (forking, preforked): after the stop, the children
// finish on their own within the grace period (they see the stop pipe); the parent collects
// them, and kills those left once the grace period and kill_margin are over.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <thread>

#include "event/stop_signal.hpp"

namespace spoold {

// How long after the grace period the parent waits before it kills the children left.
inline constexpr auto kill_margin = std::chrono::milliseconds(500);

// Until no child is alive: collects the children that exit until `kill_at`, then sends SIGKILL
// to those left and collects them. `alive()` counts the children left; `reap(block)` collects
// the exited ones and says whether it found one (block: waits for one first); `each_pid(f)`
// calls f(pid) for every child left. `what` names the children in the line on stderr.
template <class Alive, class Reap, class EachPid>
void reap_then_kill(steady_clock::time_point kill_at, const char* what, Alive alive, Reap reap,
                    EachPid each_pid) {
  while (alive() > 0 && steady_clock::now() < kill_at) {
    // No signal to wait for here (SIGCHLD may go to any thread): look again shortly.
    if (!reap(false)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (alive() == 0) return;
  std::fprintf(stderr, "spoold: killing %zu %s after the grace period\n",
               static_cast<std::size_t>(alive()), what);
  each_pid([](pid_t pid) { ::kill(pid, SIGKILL); });
  while (alive() > 0 && reap(true)) {
  }
}

}  // namespace spoold
