// empty: Eff_ThreadPool's benchmark. The main thread submits N empty tasks, then waits for all
// of them; once fire-and-forget, once keeping a future per task (as Eff did). tasks/s.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "workload/task_tally.hpp"

namespace bench {

namespace {

// Times submit() (run inside the peer's run_and_wait) and the wait for the n tasks it makes.
// The tasks count themselves (task_tally), so the check costs no shared cache line. The share
// of them that the submitting thread ran itself (by_submitter) tells a hand-off from a pool
// that runs tasks inline: libgomp runs a new task in the creating thread once 64 per thread
// are queued, and a waiter that helps runs what is left when the submissions end.
// run_by_last_post, the share of the tasks that had run when the last submission returned,
// tells the two ways a pool can keep up: near 1 the workers ran each task as it came (every
// post met a worker that had to be woken or was waiting on the same lock), near 0 the
// submitter ran ahead and the workers drained a backlog. A lock-based pool is fast only in the
// second way, and which one a run falls into can change from run to run.
template <class P, class Submit>
sample timed_batch(P& peer, std::uint64_t n, const char* variant, Submit submit) {
  task_tally::reset();
  task_tally::slot* submitter = nullptr;
  std::uint64_t run_by_last_post = 0;
  const auto t0 = steady::now();
  peer.run_and_wait([&] {
    submitter = &task_tally::mine();
    submit();
    run_by_last_post = task_tally::total();
  });
  const double s = seconds_since(t0);
  check(task_tally::total() == n, std::string(P::name) + ": empty " + variant + " lost tasks");
  const double own = static_cast<double>(submitter->count.load(std::memory_order_relaxed));
  const auto share = [n](double part) { return part / static_cast<double>(n); };
  return {static_cast<double>(n) / s,
          {{"by_submitter", share(own)},
           {"run_by_last_post", share(static_cast<double>(run_by_last_post))}}};
}

template <class P>
sample fire_and_forget(P& peer, std::uint64_t n) {
  return timed_batch(peer, n, "fire-and-forget", [&] {
    for (std::uint64_t i = 0; i < n; ++i) peer.post([] { task_tally::hit(); });
  });
}

// The bulk form: one call submits all n (spool: pool.post_n; oneTBB: parallel_for; OpenMP:
// taskloop). Peers without such a call are shown as n/a.
template <class P>
sample bulk(P& peer, std::uint64_t n) {
  return timed_batch(peer, n, "bulk",
                     [&] { peer.bulk(n, [](std::size_t) { task_tally::hit(); }); });
}

constexpr std::string_view no_bulk = "no call that submits a batch: each task is one post";

// The goals' ratios (BENCHMARKS.md, "empty"): spool's per-task and bulk rates against the fastest
// peer's per-task rate, as notes on spool's two rows; and its per-task rate against the fastest
// peer that handed most tasks to its workers (by_submitter under one half, as a median), since
// a post that the submitter runs itself is a call, not a hand-off.
void note_goal_ratios(std::vector<row>& rows, const std::string& per_task,
                      const std::string& bulk_variant) {
  double best = 0;
  double best_handoff = 0;
  for (const row& r : rows) {
    if (r.variant == per_task && r.peer != spool_peer::name && r.ran()) {
      best = std::max(best, r.value().median);
      const std::optional<summary> own = r.extra("by_submitter");
      if (own && own->median < 0.5) best_handoff = std::max(best_handoff, r.value().median);
    }
  }
  if (best <= 0) return;
  for (row& r : rows) {
    if (r.peer != spool_peer::name || !r.ran()) continue;
    if (r.variant == per_task) {
      r.derived.emplace_back("vs_best_peer", r.value().median / best);
      if (best_handoff > 0 && best_handoff < best) {
        r.derived.emplace_back("vs_best_handoff_peer", r.value().median / best_handoff);
      }
    }
    if (r.variant == bulk_variant) {
      r.derived.emplace_back("vs_best_per_task_peer", r.value().median / best);
    }
  }
}

template <class P>
sample futures_kept(P& peer, std::uint64_t n) {
  using future_type = decltype(peer.submit([] { return 1; }));
  std::vector<future_type> futures;
  futures.reserve(n);  // outside the timed part: Eff's vector did not count either
  const auto t0 = steady::now();
  for (std::uint64_t i = 0; i < n; ++i) futures.push_back(peer.submit([] { return 1; }));
  std::uint64_t sum = 0;
  for (auto& f : futures) sum += static_cast<std::uint64_t>(f.get());
  const double s = seconds_since(t0);
  check(sum == n, std::string(P::name) + ": empty futures-kept lost tasks");
  return {static_cast<double>(n) / s, {}};
}

void run(const options& o, results& out) {
  const std::vector<std::uint64_t> sizes =
      !o.n.empty()
          ? o.n
          : o.by_size<std::vector<std::uint64_t>>({1'000'000, 5'000'000}, {200'000}, {2'000});
  const metric m{"throughput", "tasks/s", true};
  for (unsigned threads : o.threads) {
    for (std::uint64_t n : sizes) {
      const std::string ff = "fire-and-forget n=" + count_label(n);
      const std::string kept = "futures n=" + count_label(n);
      const std::string bulk_variant = "bulk n=" + count_label(n);
      std::vector<contender> cs;
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        return contender{ff, std::string(P::name), {}, rehearsed_run<P>(threads, [n](P& p) {
                           return fire_and_forget(p, n);
                         })};
      });
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        if constexpr (requires(P & p) { p.bulk(std::size_t{1}, [](std::size_t) {}); }) {
          return contender{bulk_variant,
                           std::string(P::name),
                           {},
                           rehearsed_run<P>(threads, [n](P& p) { return bulk(p, n); })};
        } else {
          return not_available(bulk_variant, P::name, no_bulk);
        }
      });
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        if constexpr (!P::no_future.empty()) {
          return not_available(kept, P::name, P::no_future);
        } else {
          return contender{kept, std::string(P::name), {}, rehearsed_run<P>(threads, [n](P& p) {
                             return futures_kept(p, n);
                           })};
        }
      });
      std::vector<row> rows =
          measure_point("empty", "n=" + count_label(n), threads, m, std::move(cs), o.repeat);
      note_goal_ratios(rows, ff, bulk_variant);
      out.add(std::move(rows));
    }
  }
}

}  // namespace

const experiment& empty_experiment() {
  static const experiment e{
      "empty",
      "Eff_ThreadPool's benchmark: the main thread submits N empty tasks, then waits for all.",
      "Three variants: fire-and-forget (one post per task; spool: pool.post, then wait_idle),\n"
      "bulk (one call submits all N: spool pool.post_n, oneTBB parallel_for, OpenMP taskloop;\n"
      "n/a for pools without one) and futures kept (spool: pool.submit for every task, then\n"
      "get() on each). spool's notes give its rate over the fastest peer's per-task rate\n"
      "(vs_best_peer, vs_best_per_task_peer), and over the fastest peer whose submitter ran\n"
      "under half the tasks itself (vs_best_handoff_peer, where that is another peer).\n"
      "by_submitter: the share of the tasks the submitting thread ran (libgomp runs a task\n"
      "inline once 64 per thread are queued). run_by_last_post: the share that had run when\n"
      "the last submission returned (near 0: the submitter ran ahead of the workers).\n"
      "Metric: tasks/s from the first submission to the end of the wait, on a pool created\n"
      "and warmed up beforehand. Each measurement\n"
      "follows an untimed rehearsal of the same batch on a pool of its own, so that none pays\n"
      "the one-time costs of a process's first batch (heap growth, allocator free lists).\n"
      "\n"
      "options:\n"
      "  --n LIST   task counts (default 1000000,5000000; --quick 200000; --tiny 2000)",
      {"--n"},
      run};
  return e;
}

}  // namespace bench
