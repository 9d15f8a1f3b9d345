// queue_benchmark.hpp: `spool-load-bench queue`, the queue benchmark (bench/queue/run.py).
#pragma once

namespace bench {

// Replaces this process with `python3 bench/queue/run.py ARGS...` (argv[2..]), given this
// build's spool driver (`--spool-bin`) unless ARGS name one. run.py has its own options, output
// and exit codes (bench/queue/README.md). Returns only when it cannot start: 1, with the
// reason on stderr.
int run_queue_benchmark(int argc, char** argv);

}  // namespace bench
