// elastic: Eff_ThreadPool's mixed workload, where some tasks block (a stand-in for I/O) and the
// rest compute. A fixed pool of N threads spends the blocked time with its threads asleep; an
// elastic pool starts threads to cover them. First the wall time of one batch on spool elastic
// (with and without the blocking_region hint), spool fixed and the peers, all at N threads;
// then a trace of spool elastic's threads and queue while the submission rate rises, holds and
// stops, until keep_alive has retired the extra threads.
#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "plot.hpp"
#include "watchdog.hpp"
#include "workload/task_tally.hpp"

namespace bench {

namespace {

// Trial division: deterministic CPU work whose result can be checked.
std::uint32_t count_primes_below(std::uint32_t limit) {
  std::uint32_t count = 0;
  for (std::uint32_t n = 2; n < limit; ++n) {
    bool prime = true;
    for (std::uint32_t d = 2; d * d <= n; ++d) {
      if (n % d == 0) {
        prime = false;
        break;
      }
    }
    count += prime ? 1 : 0;
  }
  return count;
}

// The workload: a share of the tasks sleep (block), the others count primes.
struct mix {
  std::uint64_t tasks = 0;
  double io_ratio = 0;                // share of the tasks that block
  std::chrono::nanoseconds io{};      // how long one of them blocks
  std::uint32_t primes_below = 0;     // a compute task's work
  std::uint32_t expected_primes = 0;  // its result, computed once up front

  // Task i blocks where the running count of blocking tasks steps up, so they are spread
  // evenly (every 4th at 0.25) whatever the ratio, and every contender gets the same sequence.
  bool is_io(std::uint64_t i) const {
    return std::floor(static_cast<double>(i + 1) * io_ratio) >
           std::floor(static_cast<double>(i) * io_ratio);
  }
};

// with_hint: the sleep is inside a spool::blocking_region, so an elastic spool pool starts a
// compensating thread at once; on any other thread the region does nothing.
void run_task(const mix& m, bool io, bool with_hint) {
  if (io && with_hint) {
    spool::blocking_region blocking;
    std::this_thread::sleep_for(m.io);
  } else if (io) {
    std::this_thread::sleep_for(m.io);
  } else if (count_primes_below(m.primes_below) != m.expected_primes) {
    check(false, "elastic: a compute task counted the primes wrong");
  }
  task_tally::hit();
}

// Posts the whole batch from the calling thread, then waits for it. Returns the wall seconds.
template <class P>
double run_batch(P& peer, const mix& m, bool with_hint) {
  task_tally::reset();
  const auto t0 = steady::now();
  peer.run_and_wait([&] {
    for (std::uint64_t i = 0; i < m.tasks; ++i)
      peer.post([&m, io = m.is_io(i), with_hint] { run_task(m, io, with_hint); });
  });
  const double wall = seconds_since(t0);
  check(task_tally::total() == m.tasks, std::string(P::name) + ": elastic lost tasks");
  return wall;
}

struct bounds {
  unsigned min = 0, max = 0;
  std::chrono::nanoseconds keep_alive{};
};

// The monitor intervals are the library's defaults (1 ms, backing off to 50 ms).
spool::config elastic_config(const bounds& b) {
  spool::config cfg;
  cfg.threads = b.min;  // what a pool without elastic sizing runs
  cfg.min_threads = b.min;
  cfg.max_threads = b.max;
  cfg.keep_alive = b.keep_alive;
  cfg.name = "bench";
  return cfg;
}

// The most threads a pool had at once, from config::on_scale. A base of elastic_spool, so that
// it exists before the pool, whose constructor already reports scaling.
class peak_threads {
 protected:
  spool::config watching(spool::config cfg) {
    cfg.on_scale = [this](const spool::scale_event& e) {
      unsigned seen = peak_live_.load(std::memory_order_relaxed);
      while (e.threads_live > seen &&
             !peak_live_.compare_exchange_weak(seen, e.threads_live, std::memory_order_relaxed)) {
      }
    };
    return cfg;
  }
  unsigned peak_live() const { return peak_live_.load(std::memory_order_relaxed); }

 private:
  std::atomic<unsigned> peak_live_{0};
};

// spool::pool sized elastically: the spool peer adapter (peers/spool_peer.hpp) over an elastic
// configuration, remembering the most threads it had at once.
class elastic_spool : private peak_threads, public spool_peer {
 public:
  explicit elastic_spool(const bounds& b) : spool_peer(watching(elastic_config(b))) {}

  // How the pool sized itself, as extras of a sample.
  std::vector<std::pair<std::string, double>> scaling() const {
    const spool::stats s = native().statistics();
    const auto peak = std::max<std::uint64_t>(peak_live(), s.threads_live);
    return {{"started", static_cast<double>(s.threads_started)},
            {"grown_load", static_cast<double>(s.grown_for_load)},
            {"grown_blocking", static_cast<double>(s.grown_for_blocking)},
            {"peak_live", static_cast<double>(peak)}};
  }
};

constexpr std::string_view no_hint_name = "spool (no hint)";
constexpr std::string_view fixed_name = "spool (fixed)";

contender elastic_contender(const std::string& variant, const mix& m, const bounds& b,
                            bool with_hint) {
  return contender{variant, std::string(with_hint ? "spool" : no_hint_name), {}, [=] {
                     settle();
                     elastic_spool pool(b);
                     warm_up(pool, b.min);
                     const double wall = run_batch(pool, m, with_hint);
                     return sample{wall * 1e3, pool.scaling()};
                   }};
}

void compare(const options& o, results& out, const mix& m, const bounds& b) {
  char variant[96];
  std::snprintf(variant, sizeof variant, "%s tasks, %g%% sleep %gms", count_label(m.tasks).c_str(),
                m.io_ratio * 100, std::chrono::duration<double, std::milli>(m.io).count());
  std::vector<contender> cs;
  if (o.wants_peer("spool")) {
    cs.push_back(elastic_contender(variant, m, b, true));
    cs.push_back(elastic_contender(variant, m, b, false));
  }
  append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
    const std::string peer(std::is_same_v<P, spool_peer> ? fixed_name : P::name);
    return contender{variant, peer, {}, fresh_run<P>(b.min, [=](P& p) {
                       return sample{run_batch(p, m, false) * 1e3, {}};
                     })};
  });
  const metric wall{"wall time", "ms", false};
  out.add(measure_point("elastic", variant, b.min, wall, std::move(cs), o.repeat));
}

// The trace: phases of the submission schedule, in order.
enum class phase : int { idle_before, ramp, plateau, drain, idle_after };
constexpr const char* phase_names[] = {"idle", "ramp", "plateau", "drain", "idle"};

struct schedule {
  double rate = 0;  // tasks/s at the plateau
  double idle_before_s = 0, ramp_s = 0, plateau_s = 0, idle_after_s = 0;

  // When the k-th task is due, in seconds from the start of the ramp: the rate rises linearly
  // from 0 to `rate` over the ramp (k tasks are due by t = sqrt(2 ramp k / rate)), then holds.
  double due_s(std::uint64_t k) const {
    const double ramp_tasks = rate * ramp_s / 2;
    const double kd = static_cast<double>(k);
    return kd < ramp_tasks ? std::sqrt(2 * ramp_s * kd / rate) : ramp_s + (kd - ramp_tasks) / rate;
  }
};

struct trace_sample {
  double t_s;
  phase at;
  spool::stats s;
};

// Reads the pool's counters every `period` on a thread of its own, until take().
class sampler {
 public:
  sampler(const spool::pool& pool, const std::atomic<phase>& now, steady::time_point start,
          std::chrono::milliseconds period) {
    samples_.reserve(4096);
    thread_ = std::jthread([&pool, &now, start, period, this](std::stop_token stop) {
      for (auto next = start; !stop.stop_requested(); next += period) {
        std::this_thread::sleep_until(next);
        samples_.push_back(
            {seconds_since(start), now.load(std::memory_order_relaxed), pool.statistics()});
      }
    });
  }
  std::vector<trace_sample> take() {
    thread_.request_stop();
    thread_.join();  // orders the sampler's writes before the return
    return std::move(samples_);
  }

 private:
  std::vector<trace_sample> samples_;
  std::jthread thread_;  // last: joined before samples_ goes away
};

// Posts the mix (blocking hint on) on the schedule; returns how many tasks it posted.
std::uint64_t submit_on_schedule(spool::pool& pool, const mix& m, const schedule& plan,
                                 steady::time_point ramp_start, std::atomic<phase>& now) {
  now.store(phase::ramp, std::memory_order_relaxed);
  const double end_s = plan.ramp_s + plan.plateau_s;
  std::uint64_t k = 0;
  for (double due = plan.due_s(0); due < end_s; due = plan.due_s(++k)) {
    std::this_thread::sleep_until(ramp_start + std::chrono::duration_cast<steady::duration>(
                                                   std::chrono::duration<double>(due)));
    if (due >= plan.ramp_s) now.store(phase::plateau, std::memory_order_relaxed);
    pool.post([&m, io = m.is_io(k)] { run_task(m, io, true); });
  }
  return k;
}

std::vector<trace_sample> record_trace(const mix& m, const bounds& b, const schedule& plan) {
  task_tally::reset();
  spool::pool pool(elastic_config(b));
  std::atomic<phase> now{phase::idle_before};
  const auto start = steady::now();
  sampler watch(pool, now, start, std::chrono::milliseconds(10));
  const auto ramp_start = start + std::chrono::duration_cast<steady::duration>(
                                      std::chrono::duration<double>(plan.idle_before_s));
  std::this_thread::sleep_until(ramp_start);
  const std::uint64_t posted = submit_on_schedule(pool, m, plan, ramp_start, now);
  now.store(phase::drain, std::memory_order_relaxed);
  pool.wait_idle();
  now.store(phase::idle_after, std::memory_order_relaxed);
  std::this_thread::sleep_for(std::chrono::duration<double>(plan.idle_after_s));
  std::vector<trace_sample> samples = watch.take();
  check(task_tally::total() == posted, "spool: elastic trace lost tasks");
  return samples;
}

bool write_trace_csv(const std::vector<trace_sample>& samples, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "spool-bench: cannot write %s\n", path.c_str());
    return false;
  }
  bool ok = std::fputs(
                "time_s,phase,threads_live,threads_busy,threads_blocked,queued,completed,"
                "submitted,threads_started,threads_retired\n",
                f) >= 0;
  for (const trace_sample& x : samples) {
    const spool::stats& s = x.s;
    ok = std::fprintf(f, "%.4f,%s,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", x.t_s,
                      phase_names[static_cast<int>(x.at)],
                      static_cast<unsigned long long>(s.threads_live),
                      static_cast<unsigned long long>(s.threads_busy),
                      static_cast<unsigned long long>(s.threads_blocked),
                      static_cast<unsigned long long>(s.queued),
                      static_cast<unsigned long long>(s.completed),
                      static_cast<unsigned long long>(s.submitted),
                      static_cast<unsigned long long>(s.threads_started),
                      static_cast<unsigned long long>(s.threads_retired)) > 0 &&
         ok;
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) std::fprintf(stderr, "spool-bench: writing %s failed\n", path.c_str());
  return ok;
}

bool plot_trace(const std::vector<trace_sample>& samples, const std::string& title,
                const std::string& png_path) {
  line_chart chart;
  chart.title = title;
  chart.y_label = "threads";
  chart.y2_label = "tasks queued";
  chart.series = {{"threads live", false, false},
                  {"threads busy", false, false},
                  {"threads blocked", false, true},
                  {"queued (right axis)", true, false}};
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const trace_sample& x = samples[i];
    chart.rows.push_back(
        {x.t_s, static_cast<double>(x.s.threads_live), static_cast<double>(x.s.threads_busy),
         static_cast<double>(x.s.threads_blocked), static_cast<double>(x.s.queued)});
    if (i == 0 || x.at != samples[i - 1].at)
      chart.marks.emplace_back(x.t_s, phase_names[static_cast<int>(x.at)]);
  }
  return plot_lines(chart, png_path);
}

// Peaks, and how long after the pool went idle it was back at min_threads.
void print_trace_summary(const std::vector<trace_sample>& samples, const bounds& b) {
  std::uint64_t peak_live = 0, peak_blocked = 0, peak_queued = 0;
  double idle_at = -1, back_at = -1;
  for (const trace_sample& x : samples) {
    peak_live = std::max(peak_live, x.s.threads_live);
    peak_blocked = std::max(peak_blocked, x.s.threads_blocked);
    peak_queued = std::max(peak_queued, x.s.queued);
    if (x.at == phase::idle_after && idle_at < 0) idle_at = x.t_s;
    if (x.at == phase::idle_after && back_at < 0 && x.s.threads_live <= b.min) back_at = x.t_s;
  }
  const spool::stats& last = samples.back().s;
  std::printf(
      "# elastic trace: peak %llu live, %llu blocked, %llu queued; started %llu, "
      "retired %llu; ",
      static_cast<unsigned long long>(peak_live), static_cast<unsigned long long>(peak_blocked),
      static_cast<unsigned long long>(peak_queued),
      static_cast<unsigned long long>(last.threads_started),
      static_cast<unsigned long long>(last.threads_retired));
  if (back_at >= 0)
    std::printf("back to %u live %.0f ms after the pool went idle (keep_alive %.0f ms)\n", b.min,
                (back_at - idle_at) * 1e3,
                std::chrono::duration<double, std::milli>(b.keep_alive).count());
  else
    std::printf("still %llu live at the end\n", static_cast<unsigned long long>(last.threads_live));
}

// Where the trace goes: --trace; else beside the chart (--plot); else beside --out, named after
// it; else the current directory.
std::string trace_csv_path(const options& o) {
  if (!o.trace_file.empty()) return o.trace_file;
  if (!o.plot_target.empty())
    return companion_path(plot_path(o.plot_target, "elastic", o.subcommand == "all"), "-trace",
                          ".csv");
  if (!o.out_file.empty()) {
    const std::string& out = o.out_file;
    return out.substr(0, out.rfind('.')) + "-elastic-trace.csv";
  }
  return "elastic-trace.csv";
}

void trace(const options& o, const mix& m, const bounds& b, const schedule& plan) {
  std::printf(
      "# elastic trace: spool min %u max %u, keep_alive %.0f ms; idle %gs, rate rising "
      "to %g tasks/s over %gs, %gs at that rate, drain, idle %gs; sampled every 10 ms\n",
      b.min, b.max, std::chrono::duration<double, std::milli>(b.keep_alive).count(),
      plan.idle_before_s, plan.rate, plan.ramp_s, plan.plateau_s, plan.idle_after_s);
  std::vector<trace_sample> samples;
  // In spool-bench's own process (a trace, not a sample), yet harmless to the measurements in
  // child processes: it is spool's pool alone, no peer's runtime, and the pool joins its
  // threads when destroyed, so no later fork copies a runtime without its threads.
  watched("elastic trace", [&] { samples = record_trace(m, b, plan); });
  print_trace_summary(samples, b);
  const std::string csv = trace_csv_path(o);
  if (write_trace_csv(samples, csv)) std::printf("# elastic trace: wrote %s\n", csv.c_str());
  std::fflush(stdout);
  if (o.plot_target.empty()) return;
  char title[192];
  std::snprintf(title, sizeof title,
                "elastic: spool min %u max %u, keep_alive %.0f ms; %g%% of tasks sleep %g ms, "
                "submission rising to %g/s",
                b.min, b.max, std::chrono::duration<double, std::milli>(b.keep_alive).count(),
                m.io_ratio * 100, std::chrono::duration<double, std::milli>(m.io).count(),
                plan.rate);
  plot_trace(
      samples, title,
      companion_path(plot_path(o.plot_target, "elastic", o.subcommand == "all"), "-trace", ".png"));
}

mix mix_from(const options& o) {
  using ms = std::chrono::duration<double, std::milli>;
  mix m;
  m.tasks = o.tasks ? *o.tasks : o.by_size<std::uint64_t>(400, 200, 24);
  m.io_ratio = o.io_ratio ? *o.io_ratio : 0.25;
  m.io = std::chrono::duration_cast<std::chrono::nanoseconds>(
      ms(o.io_ms ? *o.io_ms : o.by_size(10.0, 10.0, 2.0)));
  m.primes_below = static_cast<std::uint32_t>(
      o.primes_below ? *o.primes_below : o.by_size<std::uint64_t>(20'000, 20'000, 5'000));
  m.expected_primes = count_primes_below(m.primes_below);
  check(m.tasks >= 1, "elastic: --tasks must be at least 1");
  return m;
}

schedule schedule_from(const options& o, const bounds& b) {
  schedule plan;
  plan.rate = o.rate ? *o.rate : 2000;
  const double submitting = o.duration_s ? *o.duration_s : o.by_size(3.0, 3.0, 0.3);
  plan.ramp_s = submitting * 2 / 3;
  plan.plateau_s = submitting / 3;
  plan.idle_before_s = o.by_size(0.3, 0.3, 0.05);
  // Long enough for every extra thread to reach keep_alive idle and retire, and to see it.
  plan.idle_after_s =
      std::chrono::duration<double>(b.keep_alive).count() * o.by_size(5, 5, 2) + 0.05;
  check(plan.rate >= 1, "elastic: --rate must be at least 1 task/s");
  check(submitting > 0, "elastic: --duration must be positive");
  return plan;
}

void run(const options& o, results& out) {
  const mix m = mix_from(o);
  const auto keep_alive = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::milli>(o.keep_alive_ms ? *o.keep_alive_ms : 200));
  std::vector<bounds> sizes;  // one per --threads value: min = that value
  for (unsigned threads : o.threads) {
    const auto max = o.pool_max_threads ? static_cast<unsigned>(*o.pool_max_threads) : 16 * threads;
    check(max >= threads, "elastic: --max-threads must be at least --threads");
    sizes.push_back(bounds{threads, max, keep_alive});
  }
  std::printf(
      "# elastic: %llu tasks, %g%% of them sleep %g ms, the rest count the primes below "
      "%u (%u); spool: elastic, I/O in a blocking_region; spool (no hint): the same "
      "pool, no region; spool (fixed) and the peers: --threads threads\n",
      static_cast<unsigned long long>(m.tasks), m.io_ratio * 100,
      std::chrono::duration<double, std::milli>(m.io).count(), m.primes_below, m.expected_primes);
  std::fflush(stdout);
  for (const bounds& b : sizes) compare(o, out, m, b);
  if (o.wants_peer("spool")) trace(o, m, sizes.front(), schedule_from(o, sizes.front()));
}

}  // namespace

const experiment& elastic_experiment() {
  static const experiment e{
      "elastic",
      "Mixed blocking and compute tasks: elastic spool against fixed pools; a trace of its size.",
      "Eff_ThreadPool's mixed workload: K tasks posted from the main thread, then waited for. A\n"
      "share of them (--io-ratio, spread evenly: every 4th by default) sleep --io-ms, a stand-in\n"
      "for blocking I/O; the rest count the primes below --primes-below by trial division (about\n"
      "0.6 ms each here; the count is checked). Contenders, interleaved repeat by repeat:\n"
      "  spool            elastic: min_threads = --threads, max_threads = --max-threads, the\n"
      "                   sleep inside a spool::blocking_region (a compensating thread at once)\n"
      "  spool (no hint)  the same pool, no blocking_region: only the monitor (default\n"
      "                   intervals, 1 ms backing off to 50 ms) sees the blocked workers\n"
      "  spool (fixed)    --threads workers, as in the other experiments\n"
      "  the peers        at --threads threads (a peer's blocked thread is simply lost)\n"
      "Metric: wall time in ms; spool's rows add threads started (the min included), how many\n"
      "were grown for load and for blocking, and the peak live threads (from config::on_scale).\n"
      "\n"
      "Then a trace of spool elastic alone (min --threads, first value; hint on), sampled every\n"
      "10 ms: idle 0.3 s; the same mix posted at a rate rising linearly from 0 to --rate over\n"
      "2/3 of --duration, then --rate for 1/3; drain (wait_idle); idle for 5 x keep_alive +\n"
      "50 ms, so that the extra threads retire. keep_alive is 200 ms here (not the library's\n"
      "10 s) so that retirement fits in the run. Columns: time_s, phase, threads_live,\n"
      "threads_busy, threads_blocked, queued, completed, submitted, threads_started,\n"
      "threads_retired. The CSV goes to --trace, else beside the --plot chart\n"
      "(DIR/elastic-trace.csv), else beside --out (NAME-elastic-trace.csv), else to\n"
      "./elastic-trace.csv; with --plot, a chart of live, busy and blocked threads and the queue\n"
      "over time goes beside the bar chart (DIR/elastic-trace.png).\n"
      "\n"
      "options:\n"
      "  --tasks K          tasks per batch (default 400; --quick 200; --tiny 24)\n"
      "  --io-ratio F       share of tasks that block, 0..1 (default 0.25)\n"
      "  --io-ms MS         how long a blocking task sleeps (default 10; --tiny 2)\n"
      "  --primes-below N   a compute task's bound (default 20000; --tiny 5000)\n"
      "  --max-threads M    elastic spool's max_threads (default 16 x --threads)\n"
      "  --keep-alive-ms MS elastic spool's keep_alive (default 200)\n"
      "  --rate R           trace: tasks/s at the plateau (default 2000)\n"
      "  --duration S       trace: seconds of submission, ramp + plateau (default 3; --tiny 0.3)\n"
      "  --trace FILE.csv   trace: where the CSV goes",
      {"--tasks", "--io-ratio", "--io-ms", "--primes-below", "--max-threads", "--keep-alive-ms",
       "--rate", "--duration", "--trace"},
      run};
  return e;
}

}  // namespace bench
