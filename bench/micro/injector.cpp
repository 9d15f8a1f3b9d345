// The injector (src/queues/injector.hpp) alone: the mutex-guarded FIFO every submission from
// outside the pool passes through. Pushes here never fail: the queue is never closed, and a full
// bounded queue makes the producer wait (full_policy::block).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <memory>

#include "backoff.hpp"
#include "cores.hpp"
#include "inert_task.hpp"
#include "queues/injector.hpp"

namespace {

using spool::full_policy;
using spool::detail::injector;
using spool::detail::work_item;
using spool_micro::backoff;
using spool_micro::inert_task;

// One thread, one task: push it and pop it again. The uncontended cost of the lock, twice.
// Arg: capacity (0 = unbounded).
void BM_injector_push_pop(benchmark::State& state) {
  inert_task t;  // outlives the queue
  injector q(static_cast<std::size_t>(state.range(0)), full_policy::block, std::chrono::seconds(1));
  for (auto _ : state) {
    q.push(&t);
    work_item* got = q.pop();
    benchmark::DoNotOptimize(got);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_injector_push_pop)->ArgName("capacity")->Arg(0)->Arg(1024);

// A task's queue link is intrusive, so a task must not be pushed while it is still queued.
// A producer cycles through kRing tasks of its own; at most kBacklog (+1 per producer) are
// ever queued (a bounded run's capacity must not exceed kBacklog either), and the queue is
// FIFO, so by the time a task comes round again it has left.
constexpr std::size_t kBacklog = 1024;
constexpr std::size_t kRing = 2 * kBacklog;

// What the threads of one run share. Setup() builds it before Google Benchmark starts the
// threads; Teardown() destroys it after they have joined.
struct stage {
  stage(std::size_t capacity, std::size_t tasks)
      : tasks(new inert_task[tasks]),
        queue(capacity, full_policy::block, std::chrono::seconds(1)) {}
  std::unique_ptr<inert_task[]> tasks;  // declared first: outlives the queue
  injector queue;
};
std::unique_ptr<stage> shared;

void teardown(const benchmark::State&) { shared.reset(); }

void setup_producer_consumer(const benchmark::State& state) {
  auto producers = static_cast<std::size_t>(state.threads() / 2);
  shared = std::make_unique<stage>(static_cast<std::size_t>(state.range(0)), producers * kRing);
}

// 2, 4, 8, ... threads up to one per core: even counts, so that producers and consumers pair up.
void paired_thread_counts(benchmark::internal::Benchmark* b) {
  for (int t = 2; t <= spool_micro::cores(); t *= 2) b->Threads(t);
}

// Threads [0, n/2) push, the rest pop; every thread runs the same number of iterations, so
// the pops match the pushes exactly. A bounded queue (Arg: capacity) holds back producers
// that run ahead on its condition variable; in an unbounded one (Arg 0) they spin while
// kBacklog tasks are queued. items/s counts tasks that made it from a producer to a consumer.
void BM_injector_producer_consumer(benchmark::State& state) {
  injector& q = shared->queue;
  const int producers = state.threads() / 2;
  if (state.thread_index() < producers) {
    inert_task* ring = shared->tasks.get() + static_cast<std::size_t>(state.thread_index()) * kRing;
    const bool unbounded = state.range(0) == 0;
    std::size_t next = 0;
    for (auto _ : state) {
      if (unbounded) {
        backoff b;
        while (q.size() >= kBacklog) b.pause();
      }
      q.push(&ring[next]);
      next = (next + 1) % kRing;
    }
  } else {
    for (auto _ : state) {
      backoff b;
      work_item* got;
      while ((got = q.pop()) == nullptr) b.pause();
      benchmark::DoNotOptimize(got);
    }
    state.SetItemsProcessed(state.iterations());
  }
}
BENCHMARK(BM_injector_producer_consumer)
    ->Setup(setup_producer_consumer)
    ->Teardown(teardown)
    ->ArgName("capacity")
    ->Arg(0)
    ->Arg(1024)
    ->Apply(paired_thread_counts)
    ->UseRealTime();

void setup_mixed(const benchmark::State& state) {
  shared = std::make_unique<stage>(0, static_cast<std::size_t>(state.threads()));
}

// Every thread pushes one task and pops one, all on the same queue: the lock itself
// contended. A thread's pop never finds the queue empty (its own push is still unmatched)
// but may return another thread's task; the thread then owns that one and pushes it next,
// so no task is ever queued twice.
void BM_injector_push_pop_contended(benchmark::State& state) {
  injector& q = shared->queue;
  work_item* mine = &shared->tasks[static_cast<std::size_t>(state.thread_index())];
  for (auto _ : state) {
    q.push(mine);
    mine = q.pop();
    benchmark::DoNotOptimize(mine);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_injector_push_pop_contended)
    ->Setup(setup_mixed)
    ->Teardown(teardown)
    ->ThreadRange(1, spool_micro::cores())
    ->UseRealTime();

}  // namespace
