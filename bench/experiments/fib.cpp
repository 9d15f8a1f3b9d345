// fib: nested fork/join. fib(N), where each call with n >= cutoff spawns fib(n-1) as a task,
// computes fib(n-2) itself and waits for the child inside its own task; against the serial
// fib in the same run.
#include <atomic>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "experiments/fib_common.hpp"

namespace bench {

namespace {

// The arguments of fib(n)'s serial leaves: the calls below the cutoff, in depth-first order.
void leaves_of(int n, int cutoff, std::vector<int>& out) {
  if (n < cutoff) {
    out.push_back(n);
    return;
  }
  leaves_of(n - 1, cutoff, out);
  leaves_of(n - 2, cutoff, out);
}

// The same work as the pools' fib(n) with next to no scheduling: `threads` plain threads,
// waiting on a latch as a pool's idle workers wait, take fib(n)'s leaves from one atomic counter
// and sum their serial fibs, while the caller waits for the last leaf. That is the shape of the
// pools' runs here (the root is posted; the caller waits), without tasks, so it shows what a
// pool could reach in that repeat: a shared VM's vCPUs need not give `threads` times one
// thread's speed, nor the same speed from one millisecond to the next (BENCHMARKS.md, "The
// machine").
sample ideal_ms(std::int64_t expected, const std::vector<int>& leaves, unsigned threads) {
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> finished{0};  // leaves summed into `sum`
  std::atomic<std::int64_t> sum{0};
  auto take_leaves = [&] {
    std::int64_t mine = 0;
    std::size_t count = 0;
    for (std::size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < leaves.size();) {
      mine += fib::serial(leaves[k]);
      ++count;
    }
    if (count == 0) return;
    sum.fetch_add(mine, std::memory_order_relaxed);
    if (finished.fetch_add(count, std::memory_order_acq_rel) + count == leaves.size())
      finished.notify_one();
  };
  // The caller waits for the last leaf, not for every thread: a thread that wakes after the
  // leaves are gone costs nothing, as an idle worker costs a pool nothing.
  std::latch ready(threads), start(1);
  std::vector<std::jthread> leaf_takers;
  for (unsigned i = 0; i < threads; ++i)
    leaf_takers.emplace_back([&] {
      ready.count_down();
      start.wait();
      take_leaves();
    });
  ready.wait();
  const auto t0 = steady::now();
  start.count_down();
  for (std::size_t seen; (seen = finished.load(std::memory_order_acquire)) < leaves.size();)
    finished.wait(seen, std::memory_order_acquire);
  const double ms = seconds_since(t0) * 1e3;
  check(sum.load() == expected, "fib ideal: the leaves summed to a wrong value");
  return {ms, {}};
}

void run(const options& o, results& out) {
  std::vector<std::uint64_t> sizes =
      !o.n.empty() ? o.n : o.by_size<std::vector<std::uint64_t>>({30, 35}, {30}, {20});
  const int cutoff = static_cast<int>(o.cutoff ? *o.cutoff : 16);
  check(cutoff >= 2, "fib: --cutoff must be at least 2");
  const metric m{"time", "ms", false};
  const std::string serial = "serial fib";

  for (unsigned threads : o.threads) {
    for (std::uint64_t size : sizes) {
      check(size <= 45, "fib: --n above 45 would run for minutes");
      const int n = static_cast<int>(size);
      const std::int64_t expected = fib::serial(n);
      const std::string variant = "fib(" + std::to_string(n) + ") cutoff=" + std::to_string(cutoff);
      std::vector<contender> cs;
      cs.push_back({variant, serial, {}, [=] {
                      return timed_ms(expected, serial, [n] { return fib::serial(n); });
                    }});
      std::vector<int> leaves;
      leaves_of(n, cutoff, leaves);
      cs.push_back({variant, "ideal: leaves on a counter", {}, [=] {
                      return ideal_ms(expected, leaves, threads);
                    }});
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        return fork_join_fib<P>(variant, threads, n, cutoff, expected);
      });
      std::vector<row> rows = measure_point("fib", variant, threads, m, std::move(cs), o.repeat);
      // rows[0] is the serial fib, rows[1] the ideal schedule, then the peers. Every ratio is
      // one of medians, so speedup_vs_serial / ceiling_speedup = of_ceiling.
      const double serial_ms = rows[0].value().median;
      const double ideal = rows[1].value().median;
      rows[1].reference = true;
      rows[1].derived.emplace_back("ceiling_speedup", serial_ms / ideal);
      for (std::size_t i = 2; i < rows.size(); ++i) {
        row& r = rows[i];
        if (!r.ran()) continue;
        r.derived.emplace_back("speedup_vs_serial", serial_ms / r.value().median);
        r.derived.emplace_back("of_ceiling", ideal / r.value().median);  // 1.0: no cost
      }
      out.add(std::move(rows));
    }
  }
}

}  // namespace

const experiment& fib_experiment() {
  static const experiment e{
      "fib",
      "Nested fork/join: fib(N) with a task per call down to a cutoff, each waiting inside a task.",
      "Each call with n >= cutoff spawns fib(n-1) as a task, computes fib(n-2) itself and waits\n"
      "for the child inside its task (the root is a task too). Peers that cannot wait inside a\n"
      "task would deadlock and are n/a. Baseline in the same run: the serial fib. Metric: wall\n"
      "ms, with speedup over serial; the value is checked. The row 'ideal: leaves on a counter'\n"
      "does the same work without tasks: T plain threads take fib(N)'s leaves (the calls below\n"
      "the cutoff) from one atomic counter while the caller waits. It shows what the machine\n"
      "allowed in that repeat (ceiling_speedup = serial / its time; a shared VM may give less\n"
      "than T), and of_ceiling = its time / the pool's time (1.0: no cost over it); ratios of\n"
      "medians.\n"
      "\n"
      "options:\n"
      "  --n LIST     arguments (default 30,35; --quick 30; --tiny 20)\n"
      "  --cutoff C   calls with n < C run serially (default 16)",
      {"--n", "--cutoff"},
      run};
  return e;
}

}  // namespace bench
