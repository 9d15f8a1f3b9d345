// idle: what a pool costs when there is (almost) nothing to do. CPU seconds per wall second of
// the whole process over an interval with an idle pool, and with one tiny task every 1 ms and
// every 10 ms; and the process's context switches, which show periodic wake-ups.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "process_stats.hpp"
#include "workload/task_tally.hpp"

namespace bench {

namespace {

// tick_ms == 0: no tasks at all. Otherwise one tiny task handed over (and waited for) every
// tick_ms, from the main thread, which sleeps in between.
template <class P>
sample measure_idle(P& peer, double seconds, double tick_ms) {
  task_tally::reset();
  const process_usage before = usage_now();
  const auto start = steady::now();
  const auto end =
      start + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
  std::uint64_t ticks = 0;
  if (tick_ms <= 0) {
    std::this_thread::sleep_until(end);
  } else {
    const auto period = std::chrono::duration_cast<steady::duration>(
        std::chrono::duration<double, std::milli>(tick_ms));
    // A tick that overruns the next one's time (OpenMP on a busy machine) moves the schedule
    // on instead of queueing ticks up, so the measurement lasts `seconds` whatever a tick costs.
    for (auto next = start + period; next <= end;) {
      std::this_thread::sleep_until(next);
      peer.run_and_wait([&] { peer.post([] { task_tally::hit(); }); });
      ++ticks;
      next = std::max(next + period, steady::now());
    }
  }
  const double wall = seconds_since(start);
  const process_usage after = usage_now();
  check(task_tally::total() == ticks, std::string(P::name) + ": idle lost ticks");
  return {(after.cpu_s - before.cpu_s) / wall,
          {{"ctx_switches_per_s", static_cast<double>(after.switches() - before.switches()) / wall},
           {"ticks", static_cast<double>(ticks)}}};
}

void run(const options& o, results& out) {
  const double seconds = o.duration_s ? *o.duration_s : o.by_size(10.0, 2.0, 0.2);
  check(seconds > 0, "idle: the duration must be positive");
  std::vector<double> ticks{0};
  for (double t : o.ticks_ms.empty() ? std::vector<double>{1, 10} : o.ticks_ms) ticks.push_back(t);
  const metric m{"process CPU", "cores", false};
  char label[32];
  std::snprintf(label, sizeof label, "%gs each", seconds);
  for (unsigned threads : o.threads) {
    std::vector<contender> cs;
    for (double tick : ticks) {
      char variant[48];
      if (tick <= 0)
        std::snprintf(variant, sizeof variant, "idle %gs", seconds);
      else
        std::snprintf(variant, sizeof variant, "task every %gms, %gs", tick, seconds);
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        // 50 ms of quiet first: the previous peer's spinning threads must not count here.
        return contender{variant,
                         std::string(P::name),
                         {},
                         fresh_run<P>(
                             threads, [=](P& p) { return measure_idle(p, seconds, tick); },
                             std::chrono::milliseconds(50))};
      });
    }
    out.add(measure_point("idle", label, threads, m, std::move(cs), o.repeat_time_bound()));
  }
}

}  // namespace

const experiment& idle_experiment() {
  static const experiment e{
      "idle",
      "CPU used by an idle pool, and with one tiny task every 1 ms and every 10 ms.",
      "The pool is created and warmed up (its threads exist), then the process's CPU time and\n"
      "context switches (voluntary + involuntary, getrusage) are measured over the interval:\n"
      "with no tasks at all, and with the main thread handing over one tiny task and waiting for\n"
      "it every tick (it sleeps in between). The measurement starts right after the warm-up, so\n"
      "threads that spin before they sleep are counted. Metric: CPU seconds per wall second\n"
      "(cores), with context switches per second.\n"
      "\n"
      "options:\n"
      "  --duration S   seconds per measurement (default 10; --quick 2; --tiny 0.2)\n"
      "  --ticks LIST   task intervals in ms besides the idle run (default 1,10)",
      {"--duration", "--ticks"},
      run};
  return e;
}

}  // namespace bench
