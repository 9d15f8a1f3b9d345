// spool-post-burst: the submission path in isolation, for profiling and for comparing two
// builds of the library (docs/decisions.md). Each repeat makes a fresh pool, posts N empty tasks
// from the main thread, waits for them, and prints the rate with what getrusage says about that
// stretch: the process's CPU and context switches, and the submitting thread's own (a submitter
// that is preempted or makes system calls shows here). Also how many tasks were still queued when
// the last post returned, and how long the wait for them (the tail) took: a backlog means the
// workers, not the submitter, set the pace. And, measured just before each repeat, what one cache
// line's round trip between the first two CPUs the process may use costs: on a VM the host may move
// its virtual CPUs between placements (BENCHMARKS.md, "The machine": about 60 or 330 ns, switching
// several times a second), and every cross-CPU hand-off of the repeat pays that price (0 when
// not measured: fewer than two CPUs, or fewer than 100,000 posts, as in the smoke tests).
//
// The fourth argument picks the path: none, the unbounded pool's posts (each into the
// submitter's producer slot); `bulk`, one post_n; `bounded:CAP:POLICY`, posts to a pool with
// config::queue_capacity CAP and on_full POLICY: block or caller_runs, whose submissions go
// into the submitter's producer slot after a reservation in the bound, or discard_oldest,
// whose submissions go through the injector under its lock (the path of other priorities and
// of the outside threads past the slots). With a bound the second-last column is the share of
// the tasks the submitting thread ran itself (caller_runs runs a task there when the queue is
// full), and the last the tasks discard_oldest dropped.
//
//   spool-post-burst [THREADS [N [REPEATS [bulk | bounded:CAP:POLICY]]]]
//                                                       (defaults 2 1000000 10)
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <spool/spool.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

namespace {

double cpu_seconds(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}
double sys_seconds(const rusage& r) {
  return static_cast<double>(r.ru_stime.tv_sec) + static_cast<double>(r.ru_stime.tv_usec) * 1e-6;
}

// Runs of at least this many posts measure the cross-CPU round trip before each repeat.
constexpr long k_measured_posts = 100'000;

// Nanoseconds per round trip of one cache line between two threads pinned to the first two
// CPUs of the process's affinity mask, over 20,000 trips; 0 with fewer than two CPUs.
double cross_cpu_round_trip_ns() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return 0;
  int cpu[2];
  for (int c = 0, found = 0; found < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) cpu[found++] = c;
  }
  auto pin = [](int c) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  };
  constexpr int trips = 20000;
  // Spins, but yields now and then: if pinning failed and both threads share a CPU, each
  // trip then costs a yield instead of a time slice.
  auto wait_for = [](const std::atomic<int>& word, int value) {
    for (unsigned spins = 1; word.load(std::memory_order_acquire) != value; ++spins) {
      if (spins % 1024 == 0) std::this_thread::yield();
    }
  };
  alignas(64) std::atomic<int> ball{0};  // odd: the echo's turn; even: the pitcher's
  std::thread echo([&] {
    pin(cpu[1]);
    for (int i = 0; i < trips; ++i) {
      wait_for(ball, 2 * i + 1);
      ball.store(2 * i + 2, std::memory_order_release);
    }
  });
  // The measuring side runs on a thread of its own too, so that the caller's affinity stays.
  double ns = 0;
  std::thread pitcher([&] {
    pin(cpu[0]);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < trips; ++i) {
      ball.store(2 * i + 1, std::memory_order_release);
      wait_for(ball, 2 * i + 2);
    }
    ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        trips;
  });
  pitcher.join();
  echo.join();
  return ns;
}

// Tasks run by the calling thread of each run (the submitter's share, for caller_runs).
thread_local long ran_here = 0;

struct bound {
  std::size_t capacity = 0;  // 0: unbounded
  spool::full_policy policy = spool::full_policy::block;
};

// "bounded:CAP:POLICY", CAP at least 1; false if the text is not that.
bool parse_bound(const char* text, bound& b) {
  constexpr std::string_view prefix = "bounded:";
  const std::string_view s(text);
  if (s.substr(0, prefix.size()) != prefix) return false;
  const std::string_view rest = s.substr(prefix.size());
  const std::size_t colon = rest.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::size_t capacity = 0;
  for (const char c : rest.substr(0, colon)) {
    if (c < '0' || c > '9' || capacity > (std::size_t{1} << 40)) return false;
    capacity = capacity * 10 + static_cast<std::size_t>(c - '0');
  }
  const std::string_view policy = rest.substr(colon + 1);
  if (capacity == 0) return false;
  if (policy == "block") {
    b.policy = spool::full_policy::block;
  } else if (policy == "caller_runs") {
    b.policy = spool::full_policy::caller_runs;
  } else if (policy == "discard_oldest") {
    b.policy = spool::full_policy::discard_oldest;
  } else {
    return false;
  }
  b.capacity = capacity;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned threads = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 2;
  const long n = argc > 2 ? std::atol(argv[2]) : 1'000'000;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 10;
  const bool bulk = argc > 4 && std::strcmp(argv[4], "bulk") == 0;
  bound limit;
  const bool bad_mode = argc > 4 && !bulk && !parse_bound(argv[4], limit);
  if (threads < 1 || n < 1 || repeats < 1 || bad_mode || argc > 5) {
    std::fprintf(stderr,
                 "usage: spool-post-burst [THREADS [N [REPEATS [bulk | bounded:CAP:POLICY]]]]\n"
                 "  POLICY: block, caller_runs or discard_oldest; CAP at least 1\n");
    return 2;
  }
  std::printf("# %u threads, %ld %s, %d repeats", threads, n, bulk ? "tasks by post_n" : "posts",
              repeats);
  if (limit.capacity != 0) {
    const char* policy = limit.policy == spool::full_policy::block         ? "block"
                         : limit.policy == spool::full_policy::caller_runs ? "caller_runs"
                                                                           : "discard_oldest";
    std::printf(", queue_capacity %zu, on_full %s", limit.capacity, policy);
  }
  std::printf("\n");
  std::printf(
      "M tasks/s,process cores,process voluntary cs,process involuntary cs,"
      "submitter cores,submitter sys ms,submitter involuntary cs,submitter voluntary cs,"
      "queued after posting,tail ms,cross-CPU round trip ns,run by submitter,dropped\n");
  for (int r = 0; r < repeats; ++r) {
    spool::config cfg;
    cfg.threads = threads;
    cfg.queue_capacity = limit.capacity;
    cfg.on_full = limit.policy;
    spool::pool pool(cfg);
    pool.post([] {});
    pool.wait_idle();  // threads started and parked before the clock starts
    // Not for a run of fewer than k_measured_posts (a smoke test's): on cores that other work
    // keeps busy its 20,000 trips take far longer than the posts, and the figure means nothing.
    const double round_trip_ns = n >= k_measured_posts ? cross_cpu_round_trip_ns() : 0;
    rusage p0, t0;
    getrusage(RUSAGE_SELF, &p0);
    getrusage(RUSAGE_THREAD, &t0);
    const auto start = std::chrono::steady_clock::now();
    ran_here = 0;
    if (bulk) {
      pool.post_n(static_cast<std::size_t>(n), [](std::size_t) {});
    } else if (limit.capacity != 0) {
      for (long i = 0; i < n; ++i) pool.post([] { ++ran_here; });
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
    char by_submitter[32] = "n/a";  // only the bounded posts count where their tasks ran
    char dropped[32] = "n/a";
    if (limit.capacity != 0) {
      std::snprintf(by_submitter, sizeof by_submitter, "%.3f",
                    static_cast<double>(ran_here) / static_cast<double>(n));
      std::snprintf(dropped, sizeof dropped, "%llu",
                    static_cast<unsigned long long>(pool.statistics().cancelled));
    }
    std::printf("%.2f,%.2f,%ld,%ld,%.2f,%.1f,%ld,%ld,%zu,%.2f,%.0f,%s,%s\n",
                static_cast<double>(n) / wall / 1e6, (cpu_seconds(p1) - cpu_seconds(p0)) / wall,
                p1.ru_nvcsw - p0.ru_nvcsw, p1.ru_nivcsw - p0.ru_nivcsw,
                (cpu_seconds(t1) - cpu_seconds(t0)) / wall,
                (sys_seconds(t1) - sys_seconds(t0)) * 1e3, t1.ru_nivcsw - t0.ru_nivcsw,
                t1.ru_nvcsw - t0.ru_nvcsw, backlog, tail_ms, round_trip_ns, by_submitter, dropped);
  }
  return 0;
}
