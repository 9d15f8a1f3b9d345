// mutex_pool_cold: the textbook mutex pool (bench/peers/mutex_pool.hpp) fed N empty posts by
// main in a process of its own, right after the pool is made: the harness behind a 5M figure
// of the mutex pool that spool-bench's `empty` does not show (spool-bench warms every pool up
// first and rehearses the batch). Prints the rate and run_by_last_post, the share of the tasks
// that had run when the last post returned (as spool-bench's `empty` does).
//
//   spool-mutex-pool-cold N SETTLE_MS
//
// SETTLE_MS: how long main sleeps between making the pool and the first post, so that its
// workers are asleep on the condition variable when the posts begin (0: no pause, the workers
// may still be starting). bench/README.md says what the two ways of keeping up mean.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "peers/mutex_pool.hpp"
#include "workload/task_tally.hpp"

int main(int argc, char** argv) {
  // N: a whole number of posts, at least 1; SETTLE_MS: a whole number of ms, 0 to 60000.
  char* end_n = nullptr;
  char* end_ms = nullptr;
  const std::uint64_t n = argc == 3 ? std::strtoull(argv[1], &end_n, 10) : 0;
  const long settle_ms = argc == 3 ? std::strtol(argv[2], &end_ms, 10) : -1;
  if (argc != 3 || argv[1][0] == '-' || *end_n != '\0' || n == 0 || *end_ms != '\0' ||
      settle_ms < 0 || settle_ms > 60000) {
    std::fprintf(stderr,
                 "usage: spool-mutex-pool-cold N SETTLE_MS  (N >= 1 posts, 0 <= SETTLE_MS <= "
                 "60000)\n");
    return 2;
  }
  bench::mutex_pool pool(2);
  if (settle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < n; ++i) pool.post([] { bench::task_tally::hit(); });
  const std::uint64_t run_by_last_post = bench::task_tally::total();
  pool.wait_idle();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (bench::task_tally::total() != n) {
    std::fprintf(stderr, "spool-mutex-pool-cold: lost tasks\n");
    return 1;
  }
  std::printf("n=%llu settle_ms=%ld tasks_per_s=%.0f run_by_last_post=%.3f\n",
              static_cast<unsigned long long>(n), settle_ms, static_cast<double>(n) / s,
              static_cast<double>(run_by_last_post) / static_cast<double>(n));
  return 0;
}
