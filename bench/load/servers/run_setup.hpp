// run_setup.hpp: what a server experiment (http, siege) settles before its first measurement:
// the programs it needs, the open-file limit, the repeats and the whole seconds a run lasts,
// and how it ends when it cannot run at all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "load_options.hpp"

namespace bench {

bool is_executable(const std::string& path);
// Where the shell would find `program`, or "" if nowhere.
std::string on_path(const std::string& program);

// Ends the run before (or between) measurements: "spool-load-bench WHO: WHAT" on stderr, exit 1.
[[noreturn]] void cannot_run(const char* who, const std::string& what);

// The load generator `program` (wrk, siege) on PATH, or the end of the run (cannot_run) saying
// that scripts/install-deps.sh installs it.
void require_program(const char* who, const std::string& program);

// Load generators and servers hold one descriptor per connection: raises the soft open-file
// limit to the hard one (children inherit it) and warns, naming `who`, if that is still short
// of `connections` plus slack. Ends the run (cannot_run) if the limit cannot be read or set.
void raise_open_file_limit(std::uint64_t connections, const char* who);

// Measurements per point: --repeat, except that the smoke test's --tiny means one.
int repeat_count(const load_options& o);

// --duration, else `by_default`, as whole seconds in 1..3600; anything else is a bad option
// ("spool-load-bench WHO: --duration wants whole seconds in 1..3600WHY", exit 2).
unsigned whole_seconds(const load_options& o, double by_default, const char* who,
                       std::string_view why = "");

}  // namespace bench
