// Outside threads submitting to an unbounded pool use lock-free slots of their own; past the
// slot count, and for bounded pools, they share the injector. Either way nothing is lost.
#include <gtest/gtest.h>
#include <spool/spool.hpp>

#include "core_testing.hpp"
#include "stress_scale.hpp"

#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

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
// they travel through a slot (unbounded) or the injector (bounded).
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
