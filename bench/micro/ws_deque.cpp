// The work-stealing deque (src/queues/ws_deque.hpp) alone: the owner's LIFO end, thieves at the
// FIFO end, and the one place they race, the last element. The deque holds pointers and has
// no intrusive link, so one task may sit in it many times over.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "backoff.hpp"
#include "cores.hpp"
#include "inert_task.hpp"
#include "queues/ws_deque.hpp"

namespace {

using spool::detail::work_item;
using spool::detail::ws_deque;
using spool_micro::backoff;
using spool_micro::inert_task;

// The owner pushes a task and pops it back: what a worker pays for a task it spawns and then
// runs itself, with no thief about.
void BM_deque_push_pop(benchmark::State& state) {
  ws_deque d;
  inert_task t;
  for (auto _ : state) {
    d.push(&t);
    work_item* got = d.pop();
    benchmark::DoNotOptimize(got);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_deque_push_pop);

// The owner pushes N tasks, then pops all N: a burst of spawns drained in LIFO order. The
// deque lives across iterations, so a burst past the initial 256 slots grows the ring once,
// in the first iteration, and is then measured without growth. Arg: N.
void BM_deque_push_n_pop_n(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ws_deque d;
  inert_task t;
  for (auto _ : state) {
    for (std::int64_t i = 0; i < n; ++i) d.push(&t);
    for (std::int64_t i = 0; i < n; ++i) {
      work_item* got = d.pop();
      benchmark::DoNotOptimize(got);
    }
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_deque_push_n_pop_n)->Arg(64)->Arg(4096);

// Thread 0 owns the deque and pushes; every other thread steals. The owner holds back while
// kBacklog tasks are queued, so the deque stays small and never grows.
constexpr std::size_t kBacklog = 1024;

struct steal_stage {
  // CASes one thief lost to another, written only by that thief. Thread 0 reads them after
  // its loop, when Google Benchmark's stop barrier has seen every thread finish.
  struct alignas(64) slot {
    std::atomic<std::uint64_t> n{0};
  };
  explicit steal_stage(int threads) : lost(new slot[static_cast<std::size_t>(threads)]) {}
  ws_deque deque;
  inert_task task;
  std::unique_ptr<slot[]> lost;  // by thread index
};
std::unique_ptr<steal_stage> shared;

void setup(const benchmark::State& state) {
  shared = std::make_unique<steal_stage>(state.threads());
}
void teardown(const benchmark::State&) { shared.reset(); }

// Each thief takes one task per iteration and the owner pushes one per thief, so the thieves
// take exactly what was pushed. items/s counts steals; lost_cas_per_steal is how often a
// thief saw a task but another thief got it first.
void BM_deque_steal(benchmark::State& state) {
  ws_deque& d = shared->deque;
  const int thieves = state.threads() - 1;
  if (state.thread_index() == 0) {
    for (auto _ : state) {
      for (int k = 0; k < thieves; ++k) {
        backoff b;
        while (d.size() >= kBacklog) b.pause();
        d.push(&shared->task);
      }
    }
    std::uint64_t lost = 0;
    for (int i = 1; i < state.threads(); ++i) {
      lost += shared->lost[static_cast<std::size_t>(i)].n.load(std::memory_order_relaxed);
    }
    state.counters["lost_cas_per_steal"] =
        static_cast<double>(lost) / static_cast<double>(state.iterations() * thieves);
  } else {
    auto& lost = shared->lost[static_cast<std::size_t>(state.thread_index())].n;
    for (auto _ : state) {
      backoff b;
      for (;;) {
        ws_deque::steal_result r = d.steal();
        if (r.item != nullptr) break;
        if (r.retry) {
          lost.store(lost.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        } else {
          b.pause();
        }
      }
    }
    state.SetItemsProcessed(state.iterations());
  }
}
BENCHMARK(BM_deque_steal)
    ->Setup(setup)
    ->Teardown(teardown)
    ->ThreadRange(2, spool_micro::cores())
    ->UseRealTime();

// The last element, contended: the owner pushes one task and pops it, while a thief steals
// in a tight loop for the whole run. Each round the owner's pop races the thief's CAS on
// top_. stolen is the fraction of rounds the thief won.
void BM_deque_last_element(benchmark::State& state) {
  ws_deque d;
  inert_task t;
  std::atomic<bool> stop{false};
  std::uint64_t stolen = 0;
  std::thread thief([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      if (d.steal().item != nullptr) ++stolen;
    }
  });
  for (auto _ : state) {
    d.push(&t);
    work_item* got = d.pop();
    benchmark::DoNotOptimize(got);
  }
  stop.store(true, std::memory_order_relaxed);
  thief.join();
  state.SetItemsProcessed(state.iterations());
  state.counters["stolen"] = static_cast<double>(stolen) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_deque_last_element)->UseRealTime();

}  // namespace
