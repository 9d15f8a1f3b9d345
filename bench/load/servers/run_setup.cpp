#include "servers/run_setup.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bench {

bool is_executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, colon - start) + "/" + program;
    if (colon > start && is_executable(candidate)) return candidate;
    start = colon + 1;
  }
  return "";
}

[[noreturn]] void cannot_run(const char* who, const std::string& what) {
  std::fprintf(stderr, "spool-load-bench %s: %s\n", who, what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

void require_program(const char* who, const std::string& program) {
  if (on_path(program).empty())
    cannot_run(who,
               program + " is not installed (not on PATH); scripts/install-deps.sh installs it");
}

void raise_open_file_limit(std::uint64_t connections, const char* who) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
    cannot_run(who, std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
      cannot_run(who, std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < connections + 100)
    std::fprintf(stderr,
                 "spool-load-bench %s: warning: the open-file limit (%llu) is below %llu "
                 "connections plus slack; expect connect errors (raise `ulimit -Hn`)\n",
                 who, static_cast<unsigned long long>(lim.rlim_cur),
                 static_cast<unsigned long long>(connections));
}

int repeat_count(const load_options& o) {
  return o.size == size_mode::tiny && !o.repeat_given ? 1 : o.repeat_time_bound();
}

unsigned whole_seconds(const load_options& o, double by_default, const char* who,
                       std::string_view why) {
  const double seconds = o.duration_s ? *o.duration_s : by_default;
  if (seconds < 1 || seconds != std::floor(seconds) || seconds > 3600) {
    std::fprintf(stderr, "spool-load-bench %s: --duration wants whole seconds in 1..3600%.*s\n",
                 who, static_cast<int>(why.size()), why.data());
    std::exit(2);
  }
  return static_cast<unsigned>(seconds);
}

}  // namespace bench
