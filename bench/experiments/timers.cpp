// timers: many delayed tasks with deadlines spread over an interval; how late each one starts
// (its callable's first instruction minus its deadline), and the CPU the process uses while
// they come due. spool's post_at against a std::thread + std::condition_variable timer queue
// (peers/cv_timer_queue.hpp) and Boost.Asio's steady_timer on its thread_pool.
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <memory>
#include <optional>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/cv_timer_queue.hpp"
#include "peers/spool_peer.hpp"
#include "process_stats.hpp"
#include "workload/spin.hpp"

namespace bench {

namespace {

using clock_type = std::chrono::steady_clock;

// The deadlines: `count` of them spread evenly over `spread`, starting `lead` from now, in a
// fixed shuffled order (so the queues see deadlines out of order, as real timers come).
struct plan {
  std::vector<clock_type::time_point> deadline;  // by timer
  std::vector<std::uint32_t> order;              // the order they are scheduled in
  std::vector<std::int64_t> late_ns;             // filled by the callables
};

plan make_plan(std::uint64_t count, std::chrono::nanoseconds spread,
               std::chrono::nanoseconds lead) {
  plan p;
  p.deadline.resize(count);
  p.order.resize(count);
  p.late_ns.assign(count, -1);
  const auto base = clock_type::now() + lead;
  for (std::uint64_t i = 0; i < count; ++i) {
    p.deadline[i] = base + spread * static_cast<std::int64_t>(i) / static_cast<std::int64_t>(count);
    p.order[i] = static_cast<std::uint32_t>(i);
  }
  std::uint64_t x = 0x9e3779b97f4a7c15u;  // a fixed xorshift shuffle
  for (std::uint64_t i = count; i > 1; --i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::swap(p.order[i - 1], p.order[x % i]);
  }
  return p;
}

double percentile(const std::vector<double>& sorted, double q) {
  return sorted[static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1))];
}

// Schedules every timer with schedule(i, deadline, callable), waits until all have run, and
// summarises: p99 lateness as the value, p50, max, and the process's CPU over the run. Each
// callable spins for `busy` after it records its lateness (0: returns at once).
template <class Schedule>
sample measure(const char* who, std::uint64_t count, std::chrono::nanoseconds spread,
               std::chrono::nanoseconds busy, Schedule schedule) {
  plan p = make_plan(count, spread, std::chrono::milliseconds(100));
  std::latch done(static_cast<std::ptrdiff_t>(count));
  const process_usage before = usage_now();
  const auto start = clock_type::now();
  for (std::uint32_t i : p.order) {
    schedule(p.deadline[i], [&p, &done, i, busy] {
      p.late_ns[i] = (clock_type::now() - p.deadline[i]).count();
      if (busy.count() > 0) spin_for(busy);
      done.count_down();
    });
  }
  done.wait();
  const double wall = std::chrono::duration<double>(clock_type::now() - start).count();
  const process_usage after = usage_now();
  std::vector<double> us;
  us.reserve(count);
  for (std::int64_t ns : p.late_ns) {
    check(ns >= 0, std::string(who) + ": a timer fired before its deadline");
    us.push_back(static_cast<double>(ns) / 1000.0);
  }
  std::sort(us.begin(), us.end());
  return {percentile(us, 0.99),
          {{"p50_us", percentile(us, 0.50)},
           {"max_us", us.back()},
           {"cpu_s", after.cpu_s - before.cpu_s},
           {"cpu_cores", (after.cpu_s - before.cpu_s) / wall}}};
}

void run(const options& o, results& out) {
  const std::uint64_t count = o.tasks ? *o.tasks : o.by_size<std::uint64_t>(100'000, 20'000, 200);
  const double spread_s = o.duration_s ? *o.duration_s : o.by_size(10.0, 2.0, 0.2);
  check(count >= 1, "timers: --tasks must be at least 1");
  check(spread_s > 0, "timers: --duration must be positive");
  const double busy_ms = o.long_ms ? *o.long_ms : 0.0;
  check(busy_ms >= 0, "timers: --long-ms must not be negative");
  const auto spread =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(spread_s));
  const auto busy = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(busy_ms / 1e3));
  const metric m{"lateness p99", "us", false};
  char each[32] = "";
  if (busy_ms > 0) std::snprintf(each, sizeof each, ", each %gms", busy_ms);
  char variant[64];
  std::snprintf(variant, sizeof variant, "%s timers over %gs%s", count_label(count).c_str(),
                spread_s, each);
  for (unsigned threads : o.threads) {
    std::vector<contender> cs;
    if (o.wants_peer("spool")) {
      // spool as configured (--spin-rounds, default 64), and without polling: an idle worker
      // that polls yields its CPU between rounds, and on a loaded machine a yield can keep it
      // away for a time slice while the due task waits for it (it counts as the spinner that
      // will find the work, so nobody is woken).
      for (const bool poll : {true, false}) {
        cs.push_back({variant, poll ? "spool" : "spool (spin_rounds 0)", {}, [=] {
                        settle();
                        spool::config cfg;
                        cfg.threads = threads;
                        cfg.name = "bench";
                        cfg.spin_rounds = poll ? spool_peer::spin_rounds : 0;
                        cfg.defer_period = spool_peer::defer_period;
                        spool::pool pool{cfg};
                        return measure("spool", count, spread, busy, [&](auto deadline, auto f) {
                          (void)pool.post_at(deadline, std::move(f));
                        });
                      }});
      }
    }
    {  // the baseline: measured whatever --peers names
      cs.push_back({variant, "cv_timer_queue", {}, [=] {
                      settle();
                      cv_timer_queue queue;
                      return measure("cv_timer_queue", count, spread, busy,
                                     [&](auto deadline, auto f) { queue.post_at(deadline, f); });
                    }});
    }
    if (o.wants_peer("asio")) {
      cs.push_back({variant, "asio", {}, [=] {
                      settle();
                      boost::asio::thread_pool pool(threads);
                      std::vector<std::optional<boost::asio::steady_timer>> timers(count);
                      std::size_t next = 0;
                      sample s = measure("asio", count, spread, busy, [&](auto deadline, auto f) {
                        auto& t = timers[next++].emplace(pool, deadline);
                        t.async_wait([f](const boost::system::error_code&) { f(); });
                      });
                      pool.join();
                      return s;
                    }});
    }
    out.add(measure_point("timers", variant, threads, m, std::move(cs), o.repeat_time_bound()));
  }
}

}  // namespace

const experiment& timers_experiment() {
  static const experiment e{
      "timers",
      "Lateness of many delayed tasks with spread deadlines, and the CPU they cost.",
      "N delayed tasks (--tasks) with deadlines spread evenly over S seconds (--duration),\n"
      "starting 100 ms after the first is scheduled, scheduled in a fixed shuffled order. Each\n"
      "task records how late it started (the clock at its first instruction minus its\n"
      "deadline; a negative value, a timer that fired early, fails the run). Contenders:\n"
      "spool's pool::post_at on a pool of --threads workers, as configured and with\n"
      "spin_rounds 0; cv_timer_queue, one std::thread\n"
      "sleeping on a std::condition_variable until the earliest deadline of a priority queue\n"
      "and running each callback itself (peers/cv_timer_queue.hpp; the baseline, measured\n"
      "whatever --peers names); asio, a steady_timer per\n"
      "task with async_wait on a boost::asio::thread_pool of --threads threads. Metric:\n"
      "lateness p99 in us, with p50, max, and the process's CPU seconds (and cores) over the\n"
      "run from the first schedule to the last start. With --long-ms each task then spins\n"
      "that long: timers come due while others' tasks still run (cv_timer_queue runs its\n"
      "tasks one after another on its thread, so each waits for those before it).\n"
      "\n"
      "options:\n"
      "  --tasks N      timers per measurement (default 100000; --quick 20000; --tiny 200)\n"
      "  --duration S   the interval the deadlines spread over (default 10; --quick 2; --tiny "
      "0.2)\n"
      "  --long-ms MS   each task spins MS after it records its lateness (default 0)",
      {"--tasks", "--duration", "--long-ms"},
      run};
  return e;
}

}  // namespace bench
