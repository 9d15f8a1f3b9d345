// coro: fib(N) as C++20 coroutines (spool::task, spool::start, co_await on a future) against
// the same fork/join written with futures, with parallel_invoke (the peers' fork_join) and
// with oneTBB; goal: the coroutine fib within 1.5x of the parallel_invoke fib.
#include <spool/coro.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/fib_common.hpp"

namespace bench {

namespace {

// fib(n-1) is started on the pool, fib(n-2) awaited here; the parent suspends on the child's
// future instead of waiting inside its task.
spool::task<std::int64_t> coro_fib(spool::pool& p, int n, int cutoff) {
  if (n < cutoff) co_return fib::serial(n);
  spool::future<std::int64_t> child = spool::start(p, coro_fib(p, n - 1, cutoff));
  const std::int64_t here = co_await coro_fib(p, n - 2, cutoff);
  co_return here + co_await std::move(child);
}

// The same with futures: fib(n-1) submitted, fib(n-2) computed, then get(), which on a worker
// runs other tasks while the child is not done (help while waiting).
std::int64_t future_fib(spool::pool& p, int n, int cutoff) {
  if (n < cutoff) return fib::serial(n);
  spool::future<std::int64_t> child =
      p.submit([&p, n, cutoff] { return future_fib(p, n - 1, cutoff); });
  const std::int64_t here = future_fib(p, n - 2, cutoff);
  return here + child.get();
}

void run(const options& o, results& out) {
  std::vector<std::uint64_t> sizes =
      !o.n.empty() ? o.n : o.by_size<std::vector<std::uint64_t>>({30, 35}, {30}, {20});
  const int cutoff = static_cast<int>(o.cutoff ? *o.cutoff : 16);
  check(cutoff >= 2, "coro: --cutoff must be at least 2");
  const metric m{"time", "ms", false};
  const std::string coro_name = "spool coroutines";

  for (unsigned threads : o.threads) {
    for (std::uint64_t size : sizes) {
      check(size <= 45, "coro: --n above 45 would run for minutes");
      const int n = static_cast<int>(size);
      const std::int64_t expected = fib::serial(n);
      const std::string variant = "fib(" + std::to_string(n) + ") cutoff=" + std::to_string(cutoff);
      std::vector<contender> cs;
      cs.push_back({variant, coro_name, {}, fresh_run<spool_peer>(threads, [=](spool_peer& p) {
                      return timed_ms(expected, coro_name, [&] {
                        return spool::start(p.native(), coro_fib(p.native(), n, cutoff)).get();
                      });
                    })});
      cs.push_back(
          {variant, "spool futures", {}, fresh_run<spool_peer>(threads, [=](spool_peer& p) {
             return timed_ms(expected, "spool futures", [&] {
               spool::pool& pool = p.native();
               auto root = [&pool, n, cutoff] { return future_fib(pool, n, cutoff); };
               return pool.submit(root).get();
             });
           })});
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        return fork_join_fib<P>(variant, threads, n, cutoff, expected);
      });
      std::vector<row> rows = measure_point("coro", variant, threads, m, std::move(cs), o.repeat);
      // rows[0] is the coroutine fib; the goal is its median over parallel_invoke's (peer
      // "spool") at most 1.5. Each row gets its median over the coroutines' median.
      const double coro_ms = rows[0].value().median;
      for (row& r : rows) {
        if (!r.ran()) continue;
        const double ratio = coro_ms / r.value().median;
        if (r.peer == "spool") rows[0].derived.emplace_back("vs_parallel_invoke", ratio);
        if (&r != &rows[0]) r.derived.emplace_back("coroutines_over_this", ratio);
      }
      out.add(std::move(rows));
    }
  }
}

}  // namespace

const experiment& coro_experiment() {
  static const experiment e{
      "coro",
      "fib(N) as coroutines vs futures vs parallel_invoke vs the peers' fork/join.",
      "Each call with n >= cutoff makes fib(n-1) a child and computes fib(n-2) itself, four\n"
      "ways: 'spool coroutines' (spool::task; the child is spool::start-ed on the pool and the\n"
      "parent co_awaits its future, suspending instead of waiting), 'spool futures' (the child\n"
      "submitted; get() helps while waiting), 'spool' (parallel_invoke, as in fib) and the\n"
      "other peers' fork/join (oneTBB's task_group). Metric: wall ms; the value is checked.\n"
      "Goal: the coroutine fib within 1.5x of parallel_invoke's (vs_parallel_invoke <= 1.5,\n"
      "a ratio of medians); coroutines_over_this is that ratio against every row.\n"
      "\n"
      "options:\n"
      "  --n LIST     arguments (default 30,35; --quick 30; --tiny 20)\n"
      "  --cutoff C   calls with n < C run serially (default 16)",
      {"--n", "--cutoff"},
      run};
  return e;
}

}  // namespace bench
