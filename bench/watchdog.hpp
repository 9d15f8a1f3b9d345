// watchdog.hpp: a measurement that runs far longer than any should (a deadlock or a lost
// wake-up in a pool) ends the program with a message naming it, instead of hanging the run
// and the smoke test silently.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace bench {

// From then on, a single measurement that runs longer than `limit` ends the program with a
// message naming it and exit code 4. A measurement in a child process is timed by this
// process's watchdog, and dies with the program.
void start_watchdog(std::chrono::seconds limit);

// Runs `body` under the watchdog (if started), as measure_point runs each measurement; `what`
// names it.
void watched(const std::string& what, const std::function<void()>& body);

// In a child made by fork: the watchdog's thread was not copied into it, and its mutex may
// have been copied locked, so the child forgets it (the parent's watchdog covers the child).
void forget_watchdog_after_fork();

}  // namespace bench
