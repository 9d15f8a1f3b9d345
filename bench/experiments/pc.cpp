// pc: the WorkerQueue experiment. One producer throttled to a send rate posts items; C
// consumers, each throttled to a receive rate, take them; for a duration. Prints the post's CSV
// line each second, and with --find-max searches the highest stable rate for 1..N consumers
// (the post's "maximum stable rate" and "more threads made it worse" questions).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "process_stats.hpp"
#include "workload/throttle.hpp"

namespace bench {

namespace {

struct pc_params {
  double send_rate;  // items/s
  double recv_rate;  // items/s, per consumer
  double seconds;
  bool print_lines;  // the per-second CSV lines
};

// A backlog this large means the consumers have lost; stop before the queue eats the memory.
constexpr std::int64_t overflow_backlog = 4'000'000;

struct pc_outcome {
  std::int64_t sent = 0, received = 0, backlog_mid = 0;
  double seconds = 0, cpu_s = 0;
  bool overflow = false;

  std::int64_t backlog() const { return std::max<std::int64_t>(0, sent - received); }
  // Stable: the producer achieved at least 97% of the send rate (post() kept up), the backlog
  // at the end is under 1% of the items sent, and it is not growing: no more than twice the
  // backlog at the half-way mark plus 0.1% of the items sent.
  bool stable(const pc_params& p) const {
    const double s = static_cast<double>(sent);
    return !overflow && s >= 0.97 * p.send_rate * p.seconds &&
           static_cast<double>(backlog()) < 0.01 * s &&
           static_cast<double>(backlog()) <= 2.0 * static_cast<double>(backlog_mid) + 0.001 * s;
  }
};

// The consumer side: each thread that runs an item of this run takes a slot of its own (its
// throttle and its count) the first time; the slots are padded so consumers share no line, and
// the object is aligned so that its fields, which every item reads, share none with the
// producer's per-item writes on the stack around it.
class alignas(64) consumers {
 public:
  explicit consumers(double rate) : rate_(rate), slots_(std::make_unique<slot[]>(max_slots)) {}

  void receive() {
    slot& s = mine();
    if (!draining_.load(std::memory_order_relaxed)) s.limit.wait();
    s.received.store(s.received.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  std::int64_t received() const {
    std::int64_t sum = 0;
    const unsigned used = std::min(used_.load(std::memory_order_acquire), max_slots);
    for (unsigned i = 0; i < used; ++i)
      sum += static_cast<std::int64_t>(slots_[i].received.load(std::memory_order_relaxed));
    return sum;
  }
  // After the measurement: take what is left unthrottled, so the pool empties quickly.
  void drain() { draining_.store(true, std::memory_order_relaxed); }

 private:
  static constexpr unsigned max_slots = 1024;  // pools may rotate threads (TBB), so not just C
  struct alignas(64) slot {
    throttle limit;
    std::atomic<std::uint64_t> received{0};
  };
  slot& mine() {
    // Pools reuse threads across runs (TBB's and OpenMP's live on), so a thread's slot is
    // tagged with the run it belongs to.
    thread_local std::uint64_t slot_run = 0;
    thread_local slot* s = nullptr;
    if (slot_run != run_) {
      const unsigned i = used_.fetch_add(1, std::memory_order_acq_rel);
      check(i < max_slots, "pc: more consumer threads than slots");
      s = &slots_[i];
      s->limit.start(rate_);
      slot_run = run_;
    }
    return *s;
  }

  static inline std::atomic<std::uint64_t> runs_{0};
  const double rate_;
  const std::uint64_t run_ = runs_.fetch_add(1) + 1;  // never 0, the threads' initial tag
  std::unique_ptr<slot[]> slots_;
  std::atomic<unsigned> used_{0};
  std::atomic<bool> draining_{false};
};

void print_line(double t, std::int64_t sent, std::int64_t received, double cpu_s) {
  std::printf("%07.3f,%09lld,%09lld,%03d,%07.3f,%09lld\n", t, static_cast<long long>(sent),
              static_cast<long long>(received), thread_count(), cpu_s,
              static_cast<long long>(resident_bytes()));
  std::fflush(stdout);
}

// Prints the CSV line at each whole second of the run, from a thread of its own (like the
// post's report task); stops at once when destroyed.
class reporter {
 public:
  reporter(bool on, steady::time_point start, double seconds, const std::atomic<std::int64_t>& sent,
           const consumers& cons, double cpu0) {
    if (!on) return;
    thread_ = std::jthread([=, &sent, &cons, this](std::stop_token stop) {
      std::unique_lock lock(mutex_);
      for (int k = 1; k < seconds; ++k) {
        wake_.wait_until(lock, stop, start + std::chrono::seconds(k), [] { return false; });
        if (stop.stop_requested()) return;
        print_line(seconds_since(start), sent.load(std::memory_order_relaxed), cons.received(),
                   usage_now().cpu_s - cpu0);
      }
    });
  }

 private:
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last: joined (after a stop request) before the rest goes away
};

template <class P>
pc_outcome run_pc(P& peer, const pc_params& p) {
  consumers cons(p.recv_rate);
  std::atomic<std::int64_t> sent{0};
  pc_outcome out;
  const double cpu0 = usage_now().cpu_s;
  const auto start = steady::now();
  const auto end = start + std::chrono::duration_cast<steady::duration>(
                               std::chrono::duration<double>(p.seconds));
  const auto half = start + (end - start) / 2;
  reporter report(p.print_lines, start, p.seconds, sent, cons, cpu0);
  peer.run_and_wait([&] {
    throttle limit(p.send_rate);
    std::int64_t n = 0;
    bool half_seen = false;
    for (;;) {
      const auto now = limit.wait();
      if (now >= end) break;
      if (!half_seen && now >= half) {
        out.backlog_mid = std::max<std::int64_t>(0, n - cons.received());
        half_seen = true;
      }
      peer.post([&cons] { cons.receive(); });
      sent.store(++n, std::memory_order_relaxed);
      if ((n & 4095) == 0 && n - cons.received() > overflow_backlog) {
        out.overflow = true;
        break;
      }
    }
    out.seconds = seconds_since(start);
    out.sent = n;
    out.received = cons.received();
    out.cpu_s = usage_now().cpu_s - cpu0;
    if (p.print_lines) print_line(out.seconds, out.sent, out.received, out.cpu_s);
    cons.drain();
  });
  return out;
}

sample as_sample(const pc_outcome& r, const pc_params& p) {
  return {static_cast<double>(r.received) / r.seconds,
          {{"sent_per_s", static_cast<double>(r.sent) / r.seconds},
           {"backlog_pct",
            r.sent ? 100.0 * static_cast<double>(r.backlog()) / static_cast<double>(r.sent) : 0},
           {"stable", r.stable(p) ? 1.0 : 0.0},
           {"cpu_cores", r.cpu_s / r.seconds}}};
}

void fixed_rate(const options& o, results& out, const pc_params& base) {
  const metric m{"received", "items/s", true};
  char variant[96];
  std::snprintf(variant, sizeof variant, "send %s/s recv %s/s each", human(base.send_rate).c_str(),
                human(base.recv_rate).c_str());
  for (unsigned threads : o.threads) {
    std::vector<contender> cs;
    append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
      if constexpr (!P::no_outside_producer.empty()) {
        return not_available(variant, P::name, P::no_outside_producer);
      } else {
        return contender{
            variant, std::string(P::name), {}, fresh_run<P>(threads, [=](P& peer) {
              std::printf(
                  "# pc %s: %u consumers, %s\nTime,Sent,Received,Threads,CpuTime,PrivateBytes\n",
                  std::string(P::name).c_str(), threads, variant);
              return as_sample(run_pc(peer, base), base);
            })};
      }
    });
    out.add(measure_point("pc", variant, threads, m, std::move(cs), o.repeat_time_bound()));
  }
}

// Doubling from the start rate until a probe is unstable (or halving until one is stable), then
// bisection (geometric) until the bracket is within 10%. Each probe is a fresh pool.
template <class P>
sample find_max(unsigned consumers_n, const pc_params& base, bool recv_follows_send) {
  int probes = 0;
  // A busy machine can only make a probe fail (a descheduled producer or consumer), never pass,
  // so a failed probe is tried once more before it is believed.
  auto stable_at = [&](double rate) {
    pc_params p = base;
    p.send_rate = rate;
    if (recv_follows_send) p.recv_rate = rate;
    for (int attempt = 1; attempt <= 2; ++attempt) {
      settle();
      P peer(consumers_n);
      warm_up(peer, consumers_n);
      const pc_outcome r = run_pc(peer, p);
      ++probes;
      const bool ok = r.stable(p);
      progress(
          "pc find-max %s C=%u: %s/s -> %s (sent %s/s, backlog %.2f%%)",
          std::string(P::name).c_str(), consumers_n, human(rate).c_str(),
          ok ? "stable" : "unstable", human(static_cast<double>(r.sent) / r.seconds).c_str(),
          r.sent ? 100.0 * static_cast<double>(r.backlog()) / static_cast<double>(r.sent) : 0.0);
      if (ok) return true;
    }
    return false;
  };
  constexpr double ceiling = 1e9, floor = 1e3;
  double lo = 0, hi = 0;
  if (stable_at(base.send_rate)) {
    lo = base.send_rate;
    while (hi == 0 && lo < ceiling) {
      if (stable_at(lo * 2))
        lo *= 2;
      else
        hi = lo * 2;
    }
  } else {
    hi = base.send_rate;
    while (lo == 0 && hi > floor) {
      if (stable_at(hi / 2))
        lo = hi / 2;
      else
        hi /= 2;
    }
  }
  while (lo > 0 && hi > 0 && hi / lo > 1.1) {
    const double mid = std::sqrt(lo * hi);
    if (stable_at(mid))
      lo = mid;
    else
      hi = mid;
  }
  return {lo, {{"probes", probes}}};
}

void find_max_rates(const options& o, results& out, const pc_params& base) {
  const metric m{"max stable rate", "items/s", true};
  const bool recv_follows_send = !o.recv_rate;
  const std::string variant = recv_follows_send
                                  ? "find-max, recv = send each"
                                  : "find-max, recv " + human(base.recv_rate) + "/s each";
  // Every consumer count is one point of the run, so that its repeats interleave the counts
  // as well as the peers: the searches whose rates are compared (one consumer against two)
  // then run side by side rather than minutes apart, while the machine's speed drifts.
  std::vector<contender> cs;
  for (unsigned c = 1; c <= o.max_threads(); ++c) {
    const std::size_t first = cs.size();
    append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
      if constexpr (!P::no_outside_producer.empty()) {
        return not_available(variant, P::name, P::no_outside_producer);
      } else {
        return contender{variant, std::string(P::name), {}, [=] {
                           return find_max<P>(c, base, recv_follows_send);
                         }};
      }
    });
    for (std::size_t i = first; i < cs.size(); ++i) cs[i].threads = c;
  }
  // A search is ~10 probes, so one per peer and consumer count unless --repeat asks for more;
  // then the table shows their median and range (one search moves a lot on a shared machine).
  out.add(measure_point("pc", variant, o.max_threads(), m, std::move(cs),
                        o.repeat_given ? o.repeat : 1));
}

void run(const options& o, results& out) {
  pc_params p{};
  p.send_rate = o.rate ? *o.rate : o.find_max ? 250'000 : o.by_size(1e6, 1e6, 2e5);
  p.recv_rate = o.recv_rate ? *o.recv_rate : p.send_rate;
  p.seconds = o.find_max ? (o.probe_s ? *o.probe_s : o.by_size(2.0, 1.0, 0.3))
                         : (o.duration_s ? *o.duration_s : o.by_size(10.0, 3.0, 0.5));
  p.print_lines = !o.find_max;
  check(p.send_rate >= 1 && p.recv_rate >= 1, "pc: rates must be at least 1/s");
  check(p.seconds > 0, "pc: the duration must be positive");
  if (o.find_max)
    find_max_rates(o, out, p);
  else
    fixed_rate(o, out, p);
}

}  // namespace

const experiment& pc_experiment() {
  static const experiment e{
      "pc",
      "The WorkerQueue experiment: a throttled producer, C throttled consumers, for a duration.",
      "One producer (the main thread) posts items at the send rate; the pool's C = --threads\n"
      "workers are the consumers, each throttled on its own to the receive rate (spinning on\n"
      "steady_clock to the next due time; catch-up limited to 50 ms of items). Each second it\n"
      "prints Time,Sent,Received,Threads,CpuTime,PrivateBytes (threads from /proc/self/status,\n"
      "CPU seconds since the run began from getrusage, private bytes = resident set). Metric:\n"
      "received items/s, with the backlog at the end and whether the run was stable:\n"
      "  stable = the producer reached >= 97% of the send rate, the backlog (sent - received) at\n"
      "  the end is < 1% of the items sent, and it is at most twice the half-way backlog plus\n"
      "  0.1% of the items sent (not growing).\n"
      "--find-max searches, for each C in 1..max(--threads), the highest stable send rate with\n"
      "each consumer's receive rate equal to it (as in the post), by doubling from --rate then\n"
      "bisection to within 10%; an unstable probe is tried twice before it counts (a busy\n"
      "machine can only make a probe fail); one search per peer and C, or --repeat N of them,\n"
      "each repeat searching for every C and peer in turn.\n"
      "\n"
      "options:\n"
      "  --rate R        send rate, items/s (default 1000000; --tiny 200000; --find-max: start, "
      "250000)\n"
      "  --recv-rate R   receive rate of each consumer (default: the send rate)\n"
      "  --duration S    seconds per run (default 10; --quick 3; --tiny 0.5)\n"
      "  --find-max      search the highest stable rate instead\n"
      "  --probe S       seconds per --find-max probe (default 2; --quick 1; --tiny 0.3)",
      {"--rate", "--recv-rate", "--duration", "--find-max", "--probe"},
      run};
  return e;
}

}  // namespace bench
