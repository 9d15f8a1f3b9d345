// process_stats.hpp: what the process itself uses (CPU, context switches, threads, memory) and
// what it runs on, from getrusage and /proc.
#pragma once

#include <cstdint>
#include <string>

namespace bench {

struct process_usage {
  double cpu_s = 0;  // user + system, all threads
  std::int64_t voluntary_switches = 0;
  std::int64_t involuntary_switches = 0;

  std::int64_t switches() const { return voluntary_switches + involuntary_switches; }
};

process_usage usage_now();
int thread_count();             // "Threads:" of /proc/self/status
std::int64_t resident_bytes();  // resident set, from /proc/self/statm
std::string cpu_model();        // "model name" of /proc/cpuinfo
unsigned online_cpus();

}  // namespace bench
