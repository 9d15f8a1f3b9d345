// The parker (src/sleep/parker.hpp) alone: what its fast paths cost, and a full sleep and wake-up
// between two threads. The protocol is the one in src/sleep/README.md ("Parking and waking").
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "backoff.hpp"
#include "sleep/parker.hpp"

namespace {

using spool::detail::parker;

// notify_one with nobody asleep: a fence and a load of a line nobody writes. Every
// submission pays this.
void BM_parker_notify_no_sleepers(benchmark::State& state) {
  parker p;
  for (auto _ : state) {
    p.notify_one();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_parker_notify_no_sleepers);

// prepare() then cancel(): a worker that registers as a sleeper and then finds work on its
// last look pays this instead of a sleep.
void BM_parker_prepare_cancel(benchmark::State& state) {
  parker p;
  for (auto _ : state) {
    p.prepare(0);
    benchmark::DoNotOptimize(p.cancel(0));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_parker_prepare_cancel);

// One side of a ping-pong: a flag that says whose turn it is, and the parker its owner
// sleeps in. Each on its own cache line.
struct side {
  alignas(64) std::atomic<bool> turn{false};
  parker sleepers;
  std::uint64_t parks = 0;  // written by the side's owner only
};

// The sleeper's half: poll `spin` rounds, then prepare, look once more, and park or cancel.
// A sleeper chosen by notify_one is counted as a spinner until it has looked once.
void await_turn(side& me, int spin) {
  for (int i = 0; i < spin && !me.turn.load(std::memory_order_acquire); ++i) {
    spool_micro::cpu_relax();
  }
  bool searching = false;
  while (!me.turn.load(std::memory_order_acquire)) {
    if (searching) {
      searching = false;
      me.sleepers.stop_spinning();
      continue;
    }
    me.sleepers.prepare(0);
    if (me.turn.load(std::memory_order_seq_cst)) {
      me.sleepers.cancel(0);
      break;
    }
    searching = me.sleepers.park(0) == parker::wake::searching;
    ++me.parks;
  }
  if (searching) me.sleepers.stop_spinning();
  // Only the owner clears its flag, and the other side sets it again only after this side
  // has handed the turn back (release/acquire), so this store cannot hide a new turn.
  me.turn.store(false, std::memory_order_relaxed);
}

// The waker's half: make the "work" visible, then notify.
void give_turn(side& other) {
  other.turn.store(true, std::memory_order_release);
  other.sleepers.notify_one();
}

// A round trip: the benchmark thread hands the turn to a partner thread and waits for it
// back; the partner waits, then hands it back. Time per iteration is one round trip, i.e.
// two wake-ups. Arg spin: rounds each side polls before parking (0: straight to the
// protocol; with a partner on the other core, polling usually catches the turn and nobody
// sleeps). parks_per_round_trip says how often the futex path was really taken.
void BM_parker_ping_pong(benchmark::State& state) {
  const int spin = static_cast<int>(state.range(0));
  side here, there;
  std::atomic<bool> stop{false};
  std::thread partner([&] {
    for (;;) {
      await_turn(there, spin);
      if (stop.load(std::memory_order_relaxed)) break;
      give_turn(here);
    }
  });
  for (auto _ : state) {
    give_turn(there);
    await_turn(here, spin);
  }
  stop.store(true, std::memory_order_relaxed);  // published by give_turn's release store
  give_turn(there);
  partner.join();
  state.SetItemsProcessed(state.iterations());
  state.counters["parks_per_round_trip"] =
      static_cast<double>(here.parks + there.parks) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_parker_ping_pong)->ArgName("spin")->Arg(0)->Arg(256)->UseRealTime();

}  // namespace
