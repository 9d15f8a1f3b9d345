#include "queue_benchmark.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "servers/run_setup.hpp"

namespace bench {

namespace {

#ifdef SPOOL_LOAD_BENCH_QUEUE_DRIVER
constexpr const char* built_driver = SPOOL_LOAD_BENCH_QUEUE_DRIVER;  // bench/queue/spool's output
#else
constexpr const char* built_driver = "";
#endif

}  // namespace

int run_queue_benchmark(int argc, char** argv) {
  const std::string python = on_path("python3");
  if (python.empty()) {
    std::fprintf(stderr, "spool-load-bench queue: python3 is not installed\n");
    return 1;
  }
  const std::string script = std::string(SPOOL_LOAD_BENCH_SOURCE) + "/bench/queue/run.py";
  std::vector<std::string> args{python, script};
  // First, so that a --spool-bin among the user's arguments, later, wins (argparse).
  if (*built_driver != '\0') args.insert(args.end(), {"--spool-bin", built_driver});
  for (int i = 2; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> exec_args;
  for (std::string& a : args) exec_args.push_back(a.data());
  exec_args.push_back(nullptr);
  execv(python.c_str(), exec_args.data());
  std::fprintf(stderr, "spool-load-bench queue: cannot run %s %s: %s\n", python.c_str(),
               script.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace bench
