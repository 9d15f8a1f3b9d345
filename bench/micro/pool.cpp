// The whole pool through its public API (include/spool/spool.hpp): the paths the parts above
// add up to. These allocate a task per submission, as real use does.
#include <benchmark/benchmark.h>

#include "spool/spool.hpp"

namespace {

constexpr int kBatch = 10'000;

spool::config with_threads(unsigned threads) {
  spool::config cfg;
  cfg.threads = threads;
  return cfg;
}

// A thread outside the pool posts kBatch empty tasks through the injector, then waits for
// idle. Arg: worker threads (more than the two cores oversubscribes them).
void BM_pool_post_outside(benchmark::State& state) {
  spool::pool pool(with_threads(static_cast<unsigned>(state.range(0))));
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) pool.post([] {});
    pool.wait_idle();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_pool_post_outside)
    ->ArgName("threads")
    ->Arg(2)
    ->Arg(16)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// One task posts kBatch empty tasks from inside a worker: they go to that worker's own deque,
// and the other workers steal from it. Arg: worker threads.
void BM_pool_post_inside(benchmark::State& state) {
  spool::pool pool(with_threads(static_cast<unsigned>(state.range(0))));
  for (auto _ : state) {
    pool.post([&pool] {
      for (int i = 0; i < kBatch; ++i) pool.post([] {});
    });
    pool.wait_idle();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_pool_post_inside)
    ->ArgName("threads")
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Submit one tiny task to an idle two-worker pool and wait for its result: time per
// iteration is one round trip. Arg spin: config::spin_rounds, the rounds an idle worker
// polls before it sleeps (64 is the default; 0 makes every submission wake a sleeper).
void BM_pool_submit_get(benchmark::State& state) {
  spool::config cfg = with_threads(2);
  cfg.spin_rounds = static_cast<unsigned>(state.range(0));
  spool::pool pool(cfg);
  for (auto _ : state) {
    int v = pool.submit([] { return 1; }).get();
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_pool_submit_get)
    ->ArgName("spin")
    ->Arg(64)
    ->Arg(0)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
