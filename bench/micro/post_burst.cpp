// spool-post-burst: the driver behind the scheduler notes in BENCHMARKS.md. Each repeat makes a
// fresh pool, posts N empty tasks from the main thread, waits for them, and prints the rate
// with what getrusage says about that stretch: the process's CPU and context switches, and the
// submitting thread's own (a submitter that is preempted or makes system calls shows here).
// Also how many tasks were still queued when the last post returned, and how long the wait
// for them (the tail) took: a backlog means the workers, not the submitter, set the pace.
//
//   spool-post-burst [THREADS [N [REPEATS [bulk]]]]     (defaults 2 1000000 10)
#include <spool/spool.hpp>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

double cpu_seconds(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}
double sys_seconds(const rusage& r) {
  return static_cast<double>(r.ru_stime.tv_sec) + static_cast<double>(r.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned threads = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 2;
  const long n = argc > 2 ? std::atol(argv[2]) : 1'000'000;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 10;
  const bool bulk = argc > 4 && std::strcmp(argv[4], "bulk") == 0;
  if (threads < 1 || n < 1 || repeats < 1) {
    std::fprintf(stderr, "usage: spool-post-burst [THREADS [N [REPEATS [bulk]]]]\n");
    return 2;
  }
  std::printf("# %u threads, %ld %s, %d repeats\n", threads, n, bulk ? "tasks by post_n" : "posts",
              repeats);
  std::printf(
      "M tasks/s,process cores,process voluntary cs,process involuntary cs,"
      "submitter cores,submitter sys ms,submitter involuntary cs,submitter voluntary cs,"
      "queued after posting,tail ms\n");
  for (int r = 0; r < repeats; ++r) {
    spool::config cfg;
    cfg.threads = threads;
    spool::pool pool(cfg);
    pool.post([] {});
    pool.wait_idle();  // threads started and parked before the clock starts
    rusage p0, t0;
    getrusage(RUSAGE_SELF, &p0);
    getrusage(RUSAGE_THREAD, &t0);
    const auto start = std::chrono::steady_clock::now();
    if (bulk) {
      pool.post_n(static_cast<std::size_t>(n), [](std::size_t) {});
    } else {
      for (long i = 0; i < n; ++i) pool.post([] {});
    }
    const auto posted = std::chrono::steady_clock::now();
    const std::size_t backlog = pool.statistics().queued;
    pool.wait_idle();
    const auto end = std::chrono::steady_clock::now();
    const double wall = std::chrono::duration<double>(end - start).count();
    const double tail_ms = std::chrono::duration<double, std::milli>(end - posted).count();
    rusage p1, t1;
    getrusage(RUSAGE_SELF, &p1);
    getrusage(RUSAGE_THREAD, &t1);
    std::printf("%.2f,%.2f,%ld,%ld,%.2f,%.1f,%ld,%ld,%zu,%.2f\n",
                static_cast<double>(n) / wall / 1e6, (cpu_seconds(p1) - cpu_seconds(p0)) / wall,
                p1.ru_nvcsw - p0.ru_nvcsw, p1.ru_nivcsw - p0.ru_nivcsw,
                (cpu_seconds(t1) - cpu_seconds(t0)) / wall,
                (sys_seconds(t1) - sys_seconds(t0)) * 1e3, t1.ru_nivcsw - t0.ru_nivcsw,
                t1.ru_nvcsw - t0.ru_nvcsw, backlog, tail_ms);
  }
  return 0;
}
