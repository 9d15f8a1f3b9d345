// spool-handoff-floor: what one round trip between two plain threads costs on this machine,
// for each way the two can wait, and how many cores the process uses meanwhile. No pool is
// involved: a "waiter" thread hands a request to a "worker" thread and waits for the answer,
// as `spool-bench latency` does through a pool, so every pool's round trip costs at least the
// row whose way of waiting it uses. The rows bound what the latency goal (p50 <= 2 us within
// 1.2 cores) can reach here: below 1.2 cores one thread must be off its CPU for most of each
// trip, and the rows say what bringing it back costs (BENCHMARKS.md, "latency").
//
// Ways to wait: *pause* polls the word with the spin-wait hint (pause on x86); *yield* polls with
// sched_yield(), which hands the CPU to any runnable thread; *sleep* goes straight into
// futex_wait, and the other side futex-wakes it. "spread" leaves placement to the kernel;
// "one CPU" pins both threads to the waiter's CPU, so that the sleeper's wake-up is a local
// switch, not a wake-up of the other (idle, halted) vCPU.
//
//   spool-handoff-floor [TRIPS]     (default 100000 trips per row)
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

#include "sleep/futex.hpp"
#include "sync/cpu_relax.hpp"

namespace {

using spool::detail::cpu_relax;
using spool::detail::futex_wait;
using spool::detail::futex_wake;

enum class wait_way { pause, yield, sleep };

const char* name(wait_way w) {
  switch (w) {
    case wait_way::pause:
      return "pause";
    case wait_way::yield:
      return "yield";
    case wait_way::sleep:
      return "sleep";
  }
  return "?";
}

// Waits until word != old. A sleeper re-checks after every return (futex_wait may return
// spuriously, or at once when the word has already changed).
void wait_change(std::atomic<std::uint32_t>& word, std::uint32_t old, wait_way way) {
  while (word.load(std::memory_order_acquire) == old) {
    switch (way) {
      case wait_way::pause:
        cpu_relax();
        break;
      case wait_way::yield:
        sched_yield();
        break;
      case wait_way::sleep:
        futex_wait(word, old);
        break;
    }
  }
}

// Publishes value; a sleeping reader is woken every time (it may be asleep or about to be:
// the wake is what lets it leave futex_wait, and a wake with nobody asleep is harmless).
void publish(std::atomic<std::uint32_t>& word, std::uint32_t value, wait_way reader) {
  word.store(value, std::memory_order_release);
  if (reader == wait_way::sleep) futex_wake(word, 1);
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

void pin_to(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) {
    std::fprintf(stderr, "spool-handoff-floor: cannot pin to CPU %d\n", cpu);
    std::exit(1);
  }
}

struct row {
  bool one_cpu;  // both threads pinned to the waiter's CPU; else the kernel places them
  wait_way waiter;
  wait_way worker;
};

void measure(const row& r, int trips) {
  cpu_set_t before;
  sched_getaffinity(0, sizeof before, &before);
  const int cpu = sched_getcpu();
  if (r.one_cpu) pin_to(cpu);

  alignas(64) std::atomic<std::uint32_t> request{0};
  alignas(64) std::atomic<std::uint32_t> answer{0};
  std::thread worker([&] {
    if (r.one_cpu) pin_to(cpu);
    for (std::uint32_t k = 1; k <= static_cast<std::uint32_t>(trips); ++k) {
      wait_change(request, k - 1, r.worker);
      publish(answer, k, r.waiter);
    }
  });

  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(trips));
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  for (std::uint32_t k = 1; k <= static_cast<std::uint32_t>(trips); ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    publish(request, k, r.worker);
    wait_change(answer, k - 1, r.waiter);
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const double cores = (process_cpu_seconds() - cpu0) / wall;
  worker.join();
  if (r.one_cpu) sched_setaffinity(0, sizeof before, &before);

  std::sort(us.begin(), us.end());
  const auto at = [&](double q) { return us[static_cast<std::size_t>(q * (us.size() - 1))]; };
  std::printf("%-8s,%-6s,%-6s,%8.2f,%8.2f,%9.1f,%6.2f\n", r.one_cpu ? "one CPU" : "spread",
              name(r.waiter), name(r.worker), at(0.5), at(0.99), us.back(), cores);
}

}  // namespace

int main(int argc, char** argv) {
  const int trips = argc > 1 ? std::atoi(argv[1]) : 100000;
  if (trips < 1) {
    std::fprintf(stderr, "usage: spool-handoff-floor [TRIPS]   (TRIPS >= 1)\n");
    return 2;
  }
  const row rows[] = {
      {false, wait_way::pause, wait_way::pause},  // both poll: the 2-core way
      {false, wait_way::yield, wait_way::yield},
      {false, wait_way::sleep, wait_way::yield},  // only the worker polls
      {false, wait_way::yield, wait_way::sleep},  // only the waiter polls
      {false, wait_way::sleep, wait_way::sleep},  // nobody polls
      {true, wait_way::yield, wait_way::yield},
      {true, wait_way::sleep, wait_way::sleep},
  };
  std::printf("# %d trips per row; times in us; cores = process CPU seconds / wall seconds\n",
              trips);
  std::printf("placement,waiter,worker,     p50,     p99,      max, cores\n");
  for (const row& r : rows) measure(r, trips);
  return 0;
}
