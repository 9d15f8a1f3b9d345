// Outside threads submitting to an unbounded pool use lock-free slots of their own; past the
// slot count, and for bounded pools, they share the injector. Either way nothing is lost.
#include <gtest/gtest.h>
#include <spool/spool.hpp>

#include "core_testing.hpp"
#include "stress_scale.hpp"
#include "support.hpp"

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

using namespace spool_test;

namespace {

// More producer threads than there are slots (32): the late ones fall back to the injector.
TEST(ProducerSlots, MoreProducersThanSlotsLoseNothing) {
  constexpr int producers = 48;
  constexpr int per_producer = 500;
  spool::pool pool{spool::config{.threads = 2}};
  std::atomic<long> sum{0};
  std::barrier start(producers);
  std::vector<std::thread> ts;
  for (int p = 0; p < producers; ++p) {
    ts.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 1; i <= per_producer; ++i) pool.post([&sum, i] { sum.fetch_add(i); });
    });
  }
  for (auto& t : ts) t.join();
  pool.wait_idle();
  EXPECT_EQ(sum.load(), static_cast<long>(producers) * per_producer * (per_producer + 1) / 2);
  spool::stats s = pool.statistics();
  EXPECT_EQ(s.submitted, static_cast<std::uint64_t>(producers * per_producer));
  EXPECT_EQ(s.completed, s.submitted);
  EXPECT_EQ(s.queued, 0u);
}

// One thread submitting to more pools than its slot cache remembers, round and round: each
// pool keeps working, and wait_idle sees every task (the counts stay consistent).
TEST(ProducerSlots, OneThreadManyPools) {
  constexpr int pools = 9;
  std::vector<std::unique_ptr<spool::pool>> ps;
  for (int i = 0; i < pools; ++i)
    ps.push_back(std::make_unique<spool::pool>(spool::config{.threads = 1}));
  std::atomic<int> ran{0};
  for (int round = 0; round < 20; ++round) {
    for (auto& p : ps) p->post([&ran] { ran.fetch_add(1); });
  }
  for (auto& p : ps) {
    p->wait_idle();
    EXPECT_EQ(p->statistics().completed, 20u);
  }
  EXPECT_EQ(ran.load(), 20 * pools);
}

// A single outside producer's tasks start in submission order on a one-thread pool, whether
// the pool is unbounded or bounded (its slot, after a reservation in the bound).
TEST(ProducerSlots, OneProducerKeepsOrder) {
  for (std::size_t capacity : {std::size_t{0}, std::size_t{4096}}) {
    spool::pool pool{spool::config{.threads = 1, .queue_capacity = capacity}};
    std::vector<int> order;
    for (int i = 0; i < 2000; ++i) pool.post([&order, i] { order.push_back(i); });
    pool.wait_idle();
    ASSERT_EQ(order.size(), 2000u);
    for (int i = 0; i < 2000; ++i)
      ASSERT_EQ(order[static_cast<std::size_t>(i)], i) << "capacity " << capacity;
  }
}

using spool::detail::core_testing;

// Holds the first worker that takes a run of a producer slot's tasks inside take_from_slot, the
// slot's batching lock held as a filler's, until the test opens `release`.
struct filler_held {
  static inline std::atomic<bool> taken{false};
  static inline std::latch* holding = nullptr;
  static inline gate* release = nullptr;
  static void pause() {
    if (taken.exchange(true)) return;
    holding->count_down();
    release->wait();
  }
};

// Both workers search one producer's slot at once; one takes a run of its tasks and is held
// there with the lock. The other meets the slot served by a filler: it must park without
// spinning (a spinner would see the slot's tasks, search, meet the lock and spin again for as
// long as the filler held it, and would never be listed as a sleeper). Let go, the filler
// fills its batch and wakes the sleeper, and every task runs.
TEST(ProducerSlots, SearchThatMeetsAServedSlotParks) {
  spool::config cfg = pool_config(2);
  cfg.spin_rounds = 64;
  spool::pool p(cfg);
  const spool::detail::core& c = spool::detail::pool_access::of(p);
  gate hold;
  std::latch started(2);
  hold_workers(p, started, hold);  // the tasks below wait in the slot meanwhile
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) p.post([&ran] { ran.fetch_add(1); });
  gate release;
  std::latch holding(1);
  filler_held::holding = &holding;
  filler_held::release = &release;
  spool::detail::queues_testing::set_fill_pause(&filler_held::pause);
  hold.open();
  holding.wait();
  // Nothing else changes the pool while the filler is held: a bounded wait for the other
  // worker to list itself, which only a worker that stopped spinning does.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (core_testing::sleepers(c) == 0 && std::chrono::steady_clock::now() < limit) {
    std::this_thread::yield();
  }
  const std::uint32_t sleepers = core_testing::sleepers(c);
  release.open();
  p.wait_idle();
  spool::detail::queues_testing::set_fill_pause(nullptr);
  EXPECT_EQ(sleepers, 1u);
  EXPECT_EQ(ran.load(), 100);
}

// Threads that exit give their slot back: 200 short-lived threads, one after another, each
// submitting and waiting for its task, all get a slot (there are 32), reusing the first.
TEST(ProducerSlots, ExitedThreadsGiveTheirSlotsBack) {
  constexpr int threads = 200;
  spool::pool pool{spool::config{.threads = 2}};
  spool::detail::core& c = spool::detail::pool_access::of(pool);
  int with_slot = 0;
  for (int i = 0; i < threads; ++i) {
    bool had_before = true, has_after = false;
    int got = -1;
    std::thread t([&] {
      had_before = core_testing::has_producer_slot(c);
      got = pool.submit([i] { return i; }).get();
      has_after = core_testing::has_producer_slot(c);
    });
    t.join();
    EXPECT_FALSE(had_before);
    EXPECT_EQ(got, i);
    if (has_after) ++with_slot;
  }
  EXPECT_EQ(with_slot, threads);
  // Each thread found the slots of those before it given back and drained.
  EXPECT_LT(core_testing::producer_slots_in_use(c), std::size_t{32});
  pool.wait_idle();
  const spool::stats s = pool.statistics();
  EXPECT_EQ(s.submitted, static_cast<std::uint64_t>(threads));
  EXPECT_EQ(s.completed, s.submitted);
}

// Waves of producers that exit with their tasks still queued, while the workers steal: a
// slot given back with tasks in it is not reused until they are taken, every task runs
// exactly once, and the counts stay settled. More threads than slots get one.
TEST(ProducerSlots, StressShortLivedProducersWithStealing) {
  const int waves = stress_iterations(40);
  constexpr int per_wave = 8;
  constexpr int per_producer = 300;
  spool::pool pool{spool::config{.threads = 3}};
  spool::detail::core& c = spool::detail::pool_access::of(pool);
  const std::size_t total = static_cast<std::size_t>(waves) * per_wave * per_producer;
  std::unique_ptr<std::atomic<int>[]> runs(new std::atomic<int>[total]);
  for (std::size_t i = 0; i < total; ++i) runs[i] = 0;
  std::atomic<int> with_slot{0};
  for (int wave = 0; wave < waves; ++wave) {
    std::vector<std::thread> ts;
    for (int k = 0; k < per_wave; ++k) {
      ts.emplace_back([&, wave, k] {
        const std::size_t base =
            (static_cast<std::size_t>(wave) * per_wave + static_cast<std::size_t>(k)) *
            per_producer;
        for (std::size_t i = 0; i < per_producer; ++i) {
          pool.post([&runs, at = base + i] { runs[at].fetch_add(1); });
        }
        if (core_testing::has_producer_slot(c)) with_slot.fetch_add(1);
      });
    }
    for (auto& t : ts) t.join();
    // Every other wave leaves its tasks queued for the next wave's threads to race with.
    if (wave % 2 == 1) pool.wait_idle();
  }
  pool.wait_idle();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < total; ++i) wrong += runs[i].load() != 1;
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(with_slot.load(), 32);
  const spool::stats s = pool.statistics();
  EXPECT_EQ(s.submitted, static_cast<std::uint64_t>(total));
  EXPECT_EQ(s.completed, s.submitted);
  EXPECT_EQ(s.queued, 0u);
}

}  // namespace
