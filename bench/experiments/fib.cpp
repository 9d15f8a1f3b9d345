// fib: nested fork/join. fib(N), where each call with n >= cutoff spawns fib(n-1) as a task,
// computes fib(n-2) itself and waits for the child inside its own task; against the serial
// fib in the same run.
#include <cstdint>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "workload/fib.hpp"

namespace bench {

namespace {

sample timed_ms(std::int64_t expected, std::string_view who, auto&& compute) {
  const auto t0 = steady::now();
  const std::int64_t got = compute();
  const double ms = seconds_since(t0) * 1e3;
  check(got == expected, std::string(who) + ": fib computed a wrong value");
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
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        if constexpr (!P::no_fork_join.empty()) {
          return not_available(variant, P::name, P::no_fork_join);
        } else {
          return contender{
              variant, std::string(P::name), {}, fresh_run<P>(threads, [=](P& p) {
                return timed_ms(expected, P::name, [&] {
                  std::int64_t result = 0;
                  // The root is a task too: every call waits inside a task.
                  p.run_and_wait([&] { p.post([&] { result = fib::fork_join(p, n, cutoff); }); });
                  return result;
                });
              })};
        }
      });
      std::vector<row> rows = measure_point("fib", variant, threads, m, std::move(cs), o.repeat);
      double serial_ms = 0;
      for (const row& r : rows)
        if (r.peer == serial && r.ran()) serial_ms = r.value().median;
      for (row& r : rows)
        if (r.ran() && serial_ms > 0)
          r.derived.emplace_back("speedup_vs_serial", serial_ms / r.value().median);
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
      "ms, with speedup over serial; the value is checked.\n"
      "\n"
      "options:\n"
      "  --n LIST     arguments (default 30,35; --quick 30; --tiny 20)\n"
      "  --cutoff C   calls with n < C run serially (default 16)",
      {"--n", "--cutoff"},
      run};
  return e;
}

}  // namespace bench
