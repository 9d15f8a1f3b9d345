// spool's worker for the queue benchmark (bench/queue/README.md, the contract):
//
//   worker --redis redis://127.0.0.1:PORT/0 --queue Q --concurrency C [--prefetch P]
//          [--no-direct]
//
// One process: a spool::queue::worker whose pool has C threads (threads, spool's way: one
// process per machine, a thread per concurrent handler), and P jobs of prefetch (default 16
// per thread), so that one claim's round trip starts many short jobs rather than one per
// thread. Task `noop` returns the wall-clock time in ns at which it started. Prints "ready"
// once started; on SIGTERM it drains (worker::stop: hand back what has not started, finish the
// rest) and exits 0.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "driver_common.hpp"
#include "spool/queue.hpp"

namespace {

constexpr const char* usage =
    "usage: worker --redis redis://HOST:PORT[/0] --queue Q --concurrency C [--prefetch P]\n"
    "              [--no-direct]   (every job claimed: worker_options::direct = false)";

}  // namespace

int main(int argc, char** argv) {
  using namespace spool_queue_bench;
  const auto a = parse_args(argc, argv, usage, {"--no-direct"});
  const unsigned concurrency =
      static_cast<unsigned>(std::atoi(required(a, "--concurrency", usage).c_str()));
  if (concurrency < 1) fail("--concurrency must be at least 1");

  // SIGTERM is taken by sigwait below: block it before any thread starts.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  try {
    spool::queue::worker_options o;
    o.queue = required(a, "--queue", usage);
    o.threads = concurrency;
    o.prefetch = a.count("--prefetch")
                     ? static_cast<unsigned>(std::atoi(a.at("--prefetch").c_str()))
                     : 16 * concurrency;
    o.direct = a.count("--no-direct") == 0;
    spool::queue::worker w(store_url(required(a, "--redis", usage)), o);
    w.handle("noop", [](const spool::queue::job_context&, std::string_view) {
      return std::to_string(now_ns());
    });
    w.start();
    std::printf("ready\n");
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    w.stop();
  } catch (const std::exception& e) {
    fail(std::string("worker: ") + e.what());
  }
  return 0;
}
