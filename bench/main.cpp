// spool-bench: the source documents' pool experiments, run on spool and on the established
// pools in the same run, each measurement in a child process of its own. `spool-bench --help`
// lists the experiments; bench/README.md says how each is measured.
#include <omp.h>
#include <oneapi/tbb/version.h>
#include <boost/version.hpp>

#include <chrono>
#include <string>

#include "experiments/experiments.hpp"
#include "measure_point.hpp"
#include "options.hpp"
#include "peers/spool_peer.hpp"
#include "program.hpp"

namespace {

using namespace bench;

std::string peer_versions(const options&) {
  return std::string("oneTBB ") + TBB_VERSION_STRING + ", Boost.Asio (Boost " +
         std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000) +
         "), OpenMP " + std::to_string(_OPENMP) + " (libgomp), mutex_pool (bench/peers)";
}

void configure(const options& o) {
  if (o.spin_rounds) spool_peer::spin_rounds = *o.spin_rounds;
  if (o.defer_period_us) spool_peer::defer_period = std::chrono::microseconds(*o.defer_period_us);
  measure_in_children(!o.same_process);
}

}  // namespace

int main(int argc, char** argv) {
  const program<options> spool_bench{
      "spool-bench",
      "The pool experiments, on spool and on oneTBB, Boost.Asio, OpenMP and a mutex pool.",
      all_experiments(),
      {},
      parse_options,
      print_options_help,
      peer_versions,
      configure};
  return run_program(spool_bench, argc, argv);
}
