#include "progress.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace bench {

namespace {

const steady::time_point program_start = steady::now();

}  // namespace

void progress(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  std::fprintf(stderr, "[%7.1fs] %s\n", seconds_since(program_start), text);
}

void check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "spool-bench: result check failed: %s\n", what.c_str());
  std::fflush(stdout);
  std::_Exit(3);  // may be on a pool's thread: no static destructors under running pools
}

}  // namespace bench
