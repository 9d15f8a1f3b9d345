#include "progress.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace bench {

namespace {

const steady::time_point program_start = steady::now();
const char* name = "spool-bench";

}  // namespace

void set_program_name(const char* program) { name = program; }

const char* program_name() { return name; }

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
  std::fprintf(stderr, "%s: result check failed: %s\n", name, what.c_str());
  std::fflush(stdout);
  std::_Exit(3);  // may be on a pool's thread: no static destructors under running pools
}

}  // namespace bench
