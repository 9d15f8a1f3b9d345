// spool-futures-kept: the futures-kept path in isolation, for profiles and for comparing two
// builds of the library. Each repeat submits N tasks that return an int from the main thread to
// one pool, keeping every future, then get()s each in order, and prints the rate and the main
// thread's CPU per task (its submissions, and the waits that take back or help).
//
//   spool-futures-kept [THREADS [N [REPEATS]]]     (defaults 2 1000000 10)
#include <sys/resource.h>
#include <spool/spool.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double thread_cpu_seconds() {
  rusage r{};
  getrusage(RUSAGE_THREAD, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned threads = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 2;
  const long n = argc > 2 ? std::atol(argv[2]) : 1000000;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 10;
  if (threads == 0 || n <= 0 || repeats <= 0) {
    std::fprintf(stderr, "usage: spool-futures-kept [THREADS [N [REPEATS]]]\n");
    return 2;
  }
  spool::config cfg;
  cfg.threads = threads;
  spool::pool pool(cfg);
  std::vector<spool::future<int>> futures;
  futures.reserve(static_cast<std::size_t>(n));
  std::printf("repeat,tasks_per_s,main_cpu_ns_per_task\n");
  for (int r = 0; r < repeats; ++r) {
    futures.clear();
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) futures.push_back(pool.submit([] { return 1; }));
    long sum = 0;
    for (auto& f : futures) sum += f.get();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = thread_cpu_seconds() - cpu0;
    if (sum != n) {
      std::fprintf(stderr, "spool-futures-kept: lost tasks (%ld of %ld)\n", sum, n);
      return 1;
    }
    std::printf("%d,%.0f,%.1f\n", r, static_cast<double>(n) / wall,
                cpu * 1e9 / static_cast<double>(n));
  }
  return 0;
}
