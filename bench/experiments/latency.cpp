// latency: with an idle pool, hand it one tiny task and wait for it, K times in a row; the
// distribution of that round trip, and the CPU the process burns meanwhile (a pool can buy
// latency by spinning: the cores figure shows the price).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>
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
// loaded machine) cannot hold the run for minutes; "trips" tells how many were made. trip(f)
// makes one round trip of the task f.
template <class P, class Trip>
sample round_trips(std::uint64_t count, std::chrono::seconds budget, Trip trip) {
  std::vector<double> us;
  us.reserve(count);
  task_tally::reset();
  const process_usage before = usage_now();
  const auto start = steady::now();
  const auto give_up = start + budget;
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto t0 = steady::now();
    if (t0 >= give_up) break;
    trip([] { task_tally::hit(); });
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

// The hand-off to a pool thread with a flag: post a task that sets an atomic flag, wait on the
// flag with std::atomic::wait (a short spin, then a futex). The waiter cannot run the task
// itself, so every trip is a hand-off: a worker catches the task, runs it, and wakes the waiter.
template <class P>
class flag_trip {
 public:
  explicit flag_trip(P& peer) : peer_(peer) {}
  template <class F>
  void operator()(F f) {
    done_.store(0, std::memory_order_relaxed);
    peer_.post([this, f] {
      f();
      done_.store(1, std::memory_order_release);
      done_.notify_one();
    });
    while (done_.load(std::memory_order_acquire) == 0) done_.wait(0, std::memory_order_acquire);
  }

 private:
  P& peer_;
  // Outlives every trip: a task's notify_one may come after its waiter has seen the flag.
  std::atomic<int> done_{0};
};

// The hand-off through a future that a worker must run: submit, then wait_for() with a
// deadline far away, then get(). spool's waiter takes back its own task only in get() and
// wait() (a deadline would not be honoured while it runs the task), so here a worker runs
// every task, as a pool thread does for std::future's peers.
template <class P>
void future_trip_by_worker(P& peer, auto f) {
  auto fut = peer.submit(f);
  fut.wait_for(std::chrono::hours(24));
  fut.get();
}

constexpr std::string_view no_flag_trip =
    "tasks are posted only from inside the arena / team, where the waiter would run them";

void run(const options& o, results& out) {
  const std::uint64_t count = o.tasks ? *o.tasks : o.by_size<std::uint64_t>(100'000, 20'000, 200);
  check(count >= 1, "latency: --tasks must be at least 1");
  const std::chrono::seconds budget(o.by_size(20, 2, 1));
  const metric m{"round trip p50", "us", false};
  const std::string own = "own wait x" + count_label(count);
  const std::string flag = "flag hand-off x" + count_label(count);
  const std::string by_worker = "future run by a worker x" + count_label(count);
  for (unsigned threads : o.threads) {
    std::vector<contender> cs;
    // The pool's own way to hand a task over and wait for it (spool: submit().get(), where
    // the waiter takes its task back when no worker has yet; tbb_task_group run + wait, the
    // same).
    append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
      if constexpr (!P::no_round_trip.empty()) {
        return not_available(own, P::name, P::no_round_trip);
      } else {
        return contender{own, std::string(P::name), {}, fresh_run<P>(threads, [=](P& p) {
                           return round_trips<P>(count, budget, [&p](auto f) { p.round_trip(f); });
                         })};
      }
    });
    append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
      if constexpr (!P::no_outside_producer.empty()) {
        return not_available(flag, P::name, no_flag_trip);
      } else {
        return contender{flag, std::string(P::name), {}, fresh_run<P>(threads, [=](P& p) {
                           flag_trip<P> trip(p);
                           return round_trips<P>(count, budget, [&trip](auto f) { trip(f); });
                         })};
      }
    });
    append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
      if constexpr (!P::no_future.empty()) {
        return not_available(by_worker, P::name, P::no_future);
      } else {
        return contender{by_worker, std::string(P::name), {}, fresh_run<P>(threads, [=](P& p) {
                           return round_trips<P>(count, budget,
                                                 [&p](auto f) { future_trip_by_worker(p, f); });
                         })};
      }
    });
    out.add(measure_point("latency", "round trip x" + count_label(count), threads, m, std::move(cs),
                          o.repeat));
  }
}

}  // namespace

const experiment& latency_experiment() {
  static const experiment e{
      "latency",
      "Round trip on an idle pool: submit one tiny task, wait for it; K times. p50/p99/max in us.",
      "Three ways to hand over one task and wait for it, each K times in a row:\n"
      "  own wait: each peer's own way: spool submit().get(), asio use_future, mutex_pool\n"
      "    std::packaged_task, tbb_task_group run + wait, tbb_arena enqueue + a counter, OpenMP\n"
      "    a parallel region running one task. spool and tbb_task_group let the waiter run\n"
      "    its own task when no worker has taken it yet, so their trips may involve no worker.\n"
      "  flag hand-off: post a task that sets an atomic flag, wait with std::atomic::wait;\n"
      "    always a hand-off to a worker and back (n/a where tasks can only be posted from\n"
      "    inside the pool: tbb_task_group, OpenMP).\n"
      "  future run by a worker: submit, wait_for() with a far deadline, get(): spool's waiter\n"
      "    runs its own task only in get()/wait(), so a worker runs each (n/a without futures).\n"
      "The round trips follow each other without pause. Also reported: the CPU the process\n"
      "used meanwhile, in cores (CPU seconds / wall seconds, from getrusage). Metric: p50 in\n"
      "microseconds, with p99 and max. A run stops early after 20 s (--quick 2 s, --tiny 1 s);\n"
      "`trips` shows how many round trips it made.\n"
      "\n"
      "options:\n"
      "  --tasks K   round trips (default 100000; --quick 20000; --tiny 200)",
      {"--tasks"},
      run};
  return e;
}

}  // namespace bench
