// empty: Eff_ThreadPool's benchmark. The main thread submits N empty tasks, then waits for all
// of them; once fire-and-forget, once keeping a future per task (as Eff did). tasks/s.
#include <cstdint>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "workload/task_tally.hpp"

namespace bench {

namespace {

// The tasks count themselves (task_tally), so the check costs no shared cache line.
template <class P>
sample fire_and_forget(P& peer, std::uint64_t n) {
  task_tally::reset();
  const auto t0 = steady::now();
  peer.run_and_wait([&] {
    for (std::uint64_t i = 0; i < n; ++i) peer.post([] { task_tally::hit(); });
  });
  const double s = seconds_since(t0);
  check(task_tally::total() == n, std::string(P::name) + ": empty fire-and-forget lost tasks");
  return {static_cast<double>(n) / s, {}};
}

// The same with spool's bulk-submit API (pool.post_n): a row of its own beside spool's.
sample fire_and_forget_bulk(spool_peer& peer, std::uint64_t n) {
  task_tally::reset();
  const auto t0 = steady::now();
  peer.run_and_wait([&] { peer.post_n(n, [](std::size_t) { task_tally::hit(); }); });
  const double s = seconds_since(t0);
  check(task_tally::total() == n, "spool: empty bulk fire-and-forget lost tasks");
  return {static_cast<double>(n) / s, {}};
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
      std::vector<contender> cs;
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        return contender{ff, std::string(P::name), {}, rehearsed_run<P>(threads, [n](P& p) {
                           return fire_and_forget(p, n);
                         })};
      });
      if (o.wants_peer(spool_peer::name)) {
        cs.push_back(contender{
            ff, "spool post_n", {}, rehearsed_run<spool_peer>(threads, [n](spool_peer& p) {
              return fire_and_forget_bulk(p, n);
            })});
      }
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        if constexpr (!P::no_future.empty()) {
          return not_available(kept, P::name, P::no_future);
        } else {
          return contender{kept, std::string(P::name), {}, rehearsed_run<P>(threads, [n](P& p) {
                             return futures_kept(p, n);
                           })};
        }
      });
      out.add(measure_point("empty", "n=" + count_label(n), threads, m, std::move(cs), o.repeat));
    }
  }
}

}  // namespace

const experiment& empty_experiment() {
  static const experiment e{
      "empty",
      "Eff_ThreadPool's benchmark: the main thread submits N empty tasks, then waits for all.",
      "Two variants: fire-and-forget (spool: pool.post, then wait_idle; and a row 'spool post_n'\n"
      "for the bulk-submit API) and futures kept (spool: pool.submit for every task, then get()\n"
      "on each). Metric: tasks/s from the first submission\n"
      "to the end of the wait, on a pool created and warmed up beforehand. Each measurement\n"
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
