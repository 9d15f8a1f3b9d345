// spool-load-bench: the programs built on spool under load, each beside a peer: spoold beside
// nginx under wrk and siege, the fleet behind HAProxy and nginx, and the queue beside Celery,
// RQ and BullMQ. `spool-load-bench --help` lists the experiments; bench/load/README.md says how
// each is measured.
#include <string>

#include "experiments/load_experiments.hpp"
#include "load_options.hpp"
#include "program.hpp"
#include "queue_benchmark.hpp"

namespace {

using namespace bench;

std::string compared(const load_options&) {
  return "spoold, nginx, HAProxy, wrk, siege (each experiment's header gives their versions)";
}

}  // namespace

int main(int argc, char** argv) {
  const program<load_options> load_bench{
      "spool-load-bench",
      "The programs built on spool under load: spoold, its fleet and the queue, each beside a "
      "peer.",
      {},
      load_experiments(),
      parse_load_options,
      print_load_options_help,
      compared,
      nullptr,
      {{"queue", "spool's queue beside Celery, RQ and BullMQ on one Redis: bench/queue/run.py",
        run_queue_benchmark}}};
  return run_program(load_bench, argc, argv);
}
