// Outside threads submitting to an unbounded pool use lock-free slots of their own; past the
// slot count, and for bounded pools, they share the injector. Either way nothing is lost.
#include <gtest/gtest.h>
#include <spool/spool.hpp>

#include <atomic>
#include <barrier>
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
  for (int i = 0; i < pools; ++i) ps.push_back(std::make_unique<spool::pool>(spool::config{.threads = 1}));
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
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(order[static_cast<std::size_t>(i)], i) << "capacity " << capacity;
  }
}

}  // namespace
