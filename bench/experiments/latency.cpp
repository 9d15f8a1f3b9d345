// latency: with an idle pool, hand it one tiny task and wait for it, K times in a row; the
// distribution of that round trip, and the CPU the process burns meanwhile (a pool can buy
// latency by spinning: the cores figure shows the price).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "process_stats.hpp"
#include "workload/task_tally.hpp"

namespace bench {

namespace {

double percentile(const std::vector<double>& sorted, double p) {
  return sorted[static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1))];
}

// Stops early after `budget` so that a pool whose round trips take milliseconds (libgomp's on a
// loaded machine) cannot hold the run for minutes; "trips" tells how many were made.
template <class P>
sample round_trips(P& peer, std::uint64_t count, std::chrono::seconds budget) {
  std::vector<double> us;
  us.reserve(count);
  task_tally::reset();
  const process_usage before = usage_now();
  const auto start = steady::now();
  const auto give_up = start + budget;
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto t0 = steady::now();
    if (t0 >= give_up) break;
    peer.round_trip([] { task_tally::hit(); });
    us.push_back(std::chrono::duration<double, std::micro>(steady::now() - t0).count());
  }
  const double wall = seconds_since(start);
  const process_usage after = usage_now();
  check(task_tally::total() == us.size(), std::string(P::name) + ": latency lost round trips");
  std::sort(us.begin(), us.end());
  return {percentile(us, 0.50),
          {{"p99_us", percentile(us, 0.99)},
           {"max_us", us.back()},
           {"cpu_cores", (after.cpu_s - before.cpu_s) / wall},
           {"trips", static_cast<double>(us.size())}}};
}

void run(const options& o, results& out) {
  const std::uint64_t count = o.tasks ? *o.tasks : o.by_size<std::uint64_t>(100'000, 20'000, 200);
  check(count >= 1, "latency: --tasks must be at least 1");
  const std::chrono::seconds budget(o.by_size(20, 2, 1));
  const metric m{"round trip p50", "us", false};
  const std::string variant = "round trip x" + count_label(count);
  for (unsigned threads : o.threads) {
    std::vector<contender> cs;
    append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
      if constexpr (!P::no_round_trip.empty()) {
        return not_available(variant, P::name, P::no_round_trip);
      } else {
        return contender{variant, std::string(P::name), {}, fresh_run<P>(threads, [=](P& p) {
                           return round_trips(p, count, budget);
                         })};
      }
    });
    out.add(measure_point("latency", variant, threads, m, std::move(cs), o.repeat));
  }
}

}  // namespace

const experiment& latency_experiment() {
  static const experiment e{
      "latency",
      "Round trip on an idle pool: submit one tiny task, wait for it; K times. p50/p99/max in us.",
      "Each peer's own way to hand over one task and wait for it: spool submit().get(), asio\n"
      "use_future, mutex_pool std::packaged_task, tbb_task_group run + wait, tbb_arena enqueue\n"
      "+ a counter, OpenMP a parallel region running one task. spool and tbb_task_group let the\n"
      "waiter run its own task when no worker has taken it yet. The round trips follow each\n"
      "other without pause. Also reported: the CPU the process used meanwhile, in cores (CPU\n"
      "seconds / wall seconds, from getrusage). Metric: p50 in microseconds, with p99 and max.\n"
      "A run stops early after 20 s (--quick 2 s, --tiny 1 s); `trips` shows how many round\n"
      "trips it made.\n"
      "\n"
      "options:\n"
      "  --tasks K   round trips (default 100000; --quick 20000; --tiny 200)",
      {"--tasks"},
      run};
  return e;
}

}  // namespace bench
