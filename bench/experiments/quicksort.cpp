// quicksort: tpool's experiment. N ints filled descending (a[i] = N - i), a median-of-three
// quicksort whose halves become tasks down to a cutoff, against the same quicksort on one
// thread and std::sort, all in the same run; and spool's own spool::parallel_sort.
#include <spool/parallel.hpp>
#include <spool/spool.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "workload/quicksort.hpp"

namespace bench {

namespace {

// Sizes and fills, times `sort`, checks; all but the sort stay outside the timed part. The
// array is allocated by the first run that needs it, in the process that measures: a run in a
// child process (the default) then touches pages of its own, never copy-on-write pages of
// spool-bench's, and the sort finds every page written by the fill, as with --same-process.
template <class Sort>
sample timed_sort(std::vector<int>& data, std::uint64_t n, std::string_view who, Sort&& sort) {
  data.resize(n);
  quicksort::fill_descending(data);
  const auto t0 = steady::now();
  sort();
  const double s = seconds_since(t0);
  check(quicksort::sorted_1_to_n(data), std::string(who) + ": quicksort left the array unsorted");
  return {s, {}};
}

// Adds speedup over the two single-threaded baselines to every row of the point.
void add_speedups(std::vector<row>& rows, const std::string& serial, const std::string& std_sort) {
  double serial_s = 0, std_sort_s = 0;
  for (const row& r : rows) {
    if (!r.ran()) continue;
    if (r.peer == serial) serial_s = r.value().median;
    if (r.peer == std_sort) std_sort_s = r.value().median;
  }
  for (row& r : rows) {
    if (!r.ran() || r.value().median <= 0) continue;
    if (std_sort_s > 0)
      r.derived.emplace_back("speedup_vs_std_sort", std_sort_s / r.value().median);
    if (serial_s > 0) r.derived.emplace_back("speedup_vs_serial", serial_s / r.value().median);
  }
}

void run(const options& o, results& out) {
  const std::uint64_t n =
      !o.n.empty() ? o.n.front() : o.by_size<std::uint64_t>(100'000'000, 10'000'000, 200'000);
  check(n >= 3 && n <= 2'000'000'000, "quicksort: --n must be in 3..2000000000");
  // Default: about a thousand leaves whatever N, enough slack for 16 threads.
  const std::size_t cutoff = o.cutoff ? *o.cutoff : std::max<std::size_t>(n / 1000, 1000);
  check(cutoff >= 16, "quicksort: --cutoff must be at least 16");
  std::vector<int> data;  // one array, reused by every run in this process (one at a time)
  const std::string size = "n=" + count_label(n);
  const std::string serial = "serial quicksort", std_sort = "std::sort";
  const metric m{"time", "s", false};

  for (unsigned threads : o.threads) {
    std::vector<contender> cs;
    cs.push_back({"1 thread " + size, serial, {}, [&] {
                    return timed_sort(data, n, serial,
                                      [&] { quicksort::sort_serial(data.data(), n); });
                  }});
    cs.push_back({"1 thread " + size, std_sort, {}, [&] {
                    return timed_sort(data, n, std_sort,
                                      [&] { std::sort(data.begin(), data.end()); });
                  }});
    // spool's parallel_sort (parallel splits at the top, then tasks down to leaves of its own
    // choosing; --cutoff does not apply), called from outside the pool: its first task is the
    // root, as for the rows below.
    if (o.wants_peer(spool_peer::name)) {
      cs.push_back({"parallel_sort " + size,
                    std::string(spool_peer::name),
                    {},
                    fresh_run<spool_peer>(threads, [&](spool_peer& s) {
                      return timed_sort(data, n, "spool parallel_sort", [&] {
                        spool::parallel_sort(s.native(), data.begin(), data.end());
                      });
                    })});
    }
    const std::string fj = "fork-join " + size, posted = "post-halves " + size;
    // Fork/join: each task waits for the half it handed off.
    append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
      if constexpr (!P::no_fork_join.empty()) {
        return not_available(fj, P::name, P::no_fork_join);
      } else {
        return contender{
            fj, std::string(P::name), {}, fresh_run<P>(threads, [&](P& p) {
              return timed_sort(data, n, P::name, [&] {
                p.run_and_wait(
                    [&] { p.post([&] { quicksort::sort_fork_join(p, data.data(), n, cutoff); }); });
              });
            })};
      }
    });
    // tpool's way: both halves posted, nobody waits inside a task; every peer can run it.
    append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
      return contender{
          posted, std::string(P::name), {}, fresh_run<P>(threads, [&](P& p) {
            return timed_sort(data, n, P::name, [&] {
              p.run_and_wait(
                  [&] { p.post([&] { quicksort::sort_post_halves(p, data.data(), n, cutoff); }); });
            });
          })};
    });
    std::vector<row> rows = measure_point("quicksort", size + " cutoff=" + count_label(cutoff),
                                          threads, m, std::move(cs), o.repeat);
    add_speedups(rows, serial, std_sort);
    out.add(std::move(rows));
  }
}

}  // namespace

const experiment& quicksort_experiment() {
  static const experiment e{
      "quicksort",
      "tpool's experiment: a recursive quicksort of N descending ints whose halves are tasks.",
      "Median-of-three Hoare partition; ranges above the cutoff are split and the halves become\n"
      "tasks: fork-join (the left half is a task its parent waits for; peers that cannot wait\n"
      "inside a task are n/a) and post-halves (tpool's way: both halves posted, the main thread\n"
      "waits for the whole tree). Baselines in the same run: the same quicksort on one thread,\n"
      "and std::sort. The root call is itself a task. Also the library's own algorithm,\n"
      "spool::parallel_sort, on spool's pool (variant parallel_sort): its top splits are\n"
      "themselves parallel, and it picks its own cutoff. Metric: seconds (fill and check\n"
      "excluded), with speedup over std::sort and over the serial quicksort; the result is\n"
      "checked.\n"
      "\n"
      "options:\n"
      "  --n COUNT     array size (default 100000000; --quick 10000000; --tiny 200000;\n"
      "                999999999 is tpool's original size, 4 GB)\n"
      "  --cutoff C    ranges of at most C elements are sorted serially (default max(N/1000, "
      "1000))",
      {"--n", "--cutoff"},
      run};
  return e;
}

}  // namespace bench
