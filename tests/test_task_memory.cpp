// Task memory (src/memory/): blocks recycled per thread and through the shared depot,
// and the rings of blocks that threads allocating more than they free take in address order.
// Tasks allocated on one thread and freed on another, in every size class and past the largest,
// are never handed out twice while alive, keep their contents, and survive their threads'
// exits. Under AddressSanitizer the cache is bypassed (every block goes to the global
// operators), so these tests then check the plain path; ThreadSanitizer checks the depot.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <latch>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "memory/task_memory_testing.hpp"
#include "spool/detail/work_item.hpp"
#include "stress_scale.hpp"

namespace {

using spool::detail::core;
using spool::detail::outcome;
using spool::detail::work_item;

// A task of N payload bytes that fills them with a pattern and can check it.
template <std::size_t N>
struct sized final : work_item {
  explicit sized(std::uint8_t seed) {
    for (std::size_t i = 0; i < N; ++i) payload[i] = static_cast<std::uint8_t>(seed + i);
  }
  bool intact(std::uint8_t seed) const {
    for (std::size_t i = 0; i < N; ++i) {
      if (payload[i] != static_cast<std::uint8_t>(seed + i)) return false;
    }
    return true;
  }
  outcome run(core&) noexcept override { return outcome::completed; }
  void cancel() noexcept override {}
  void destroy() noexcept override { delete this; }
  std::uint8_t payload[N];
};

struct alignas(64) over_aligned final : work_item {
  outcome run(core&) noexcept override { return outcome::completed; }
  void cancel() noexcept override {}
  void destroy() noexcept override { delete this; }
  char pad[8];
};

// Producer allocates, consumer frees, in rounds; the producer checks every block it holds
// alive is distinct and keeps its pattern until it is handed over. `salt` sets the patterns
// apart, so that pairs running at once would see a block that two of them were given.
template <std::size_t N>
void ping_pong_blocks(std::uint8_t salt = 0) {
  const int rounds = stress_iterations(200);
  constexpr int per_round = 500;  // more than a few batches, so the depot is used both ways
  std::vector<sized<N>*> handoff;
  std::barrier sync(2);
  std::thread consumer([&] {
    for (int r = 0; r < rounds; ++r) {
      sync.arrive_and_wait();  // the producer filled `handoff`
      for (auto* t : handoff) {
        EXPECT_TRUE(t->intact(static_cast<std::uint8_t>(r + salt)));
        t->destroy();
      }
      handoff.clear();
      sync.arrive_and_wait();  // `handoff` is empty again
    }
  });
  for (int r = 0; r < rounds; ++r) {
    std::set<const void*> live;
    for (int i = 0; i < per_round; ++i) {
      auto* t = new sized<N>(static_cast<std::uint8_t>(r + salt));
      ASSERT_TRUE(live.insert(t).second) << "a block handed out twice";
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(t) % alignof(sized<N>), 0u);
      handoff.push_back(t);
    }
    sync.arrive_and_wait();
    sync.arrive_and_wait();
  }
  consumer.join();
}

TEST(TaskMemory, BlocksCrossThreadsInEveryClass) {
  ping_pong_blocks<8>();     // 32-byte class
  ping_pong_blocks<40>();    // 64
  ping_pong_blocks<100>();   // 128
  ping_pong_blocks<200>();   // 256
  ping_pong_blocks<1000>();  // past the classes: the global operator
}

// Several pairs at once, more threads than cores: threads trade magazines with the depot at
// the same moments, so the depot's lock is contended (ThreadSanitizer checks the trades). A
// block handed out to two pairs would show as a pattern overwritten by the other pair. Whether
// any thread here finds the depot busy depends on the scheduler; BusyDepotIsNeverWaitedFor
// below forces that path.
TEST(TaskMemory, PairsTradingWithTheDepotAtOnce) {
  constexpr int pairs = 4;
  std::vector<std::thread> runners;
  for (int p = 0; p < pairs; ++p) {
    runners.emplace_back([p] { ping_pong_blocks<8>(static_cast<std::uint8_t>(61 * p)); });
  }
  for (auto& t : runners) t.join();
}

// The depot held by another thread the whole time: a thread allocating and then freeing more
// blocks than its two magazines hold never waits for the lock. Its allocations come from the
// global operator a magazine at a time and its frees past the magazines go back to it; every
// block stays distinct and intact, and once the depot is free again the thread's exit hands
// its full magazines over (the lock taken for real there).
TEST(TaskMemory, BusyDepotIsNeverWaitedFor) {
  namespace hooks = spool::detail::task_memory_testing;
  constexpr int count = 300;  // past two magazines of 64
  const std::uint64_t fallbacks_before = hooks::busy_fallbacks();
  hooks::hold_depot(sizeof(sized<8>));
  std::latch done(1), released(1);
  std::thread user([&] {
    std::vector<sized<8>*> made;
    for (int i = 0; i < count; ++i) made.push_back(new sized<8>(static_cast<std::uint8_t>(i)));
    EXPECT_EQ(std::set<const void*>(made.begin(), made.end()).size(), made.size())
        << "a block handed out twice";
    for (int i = 0; i < count; ++i) {
      EXPECT_TRUE(made[i]->intact(static_cast<std::uint8_t>(i)));
      made[i]->destroy();
    }
    done.count_down();  // everything above ran while the depot was held
    released.wait();    // the thread's exit takes the depot's lock
  });
  done.wait();
  const std::uint64_t fallbacks = hooks::busy_fallbacks() - fallbacks_before;
  hooks::release_depot(sizeof(sized<8>));
  released.count_down();
  user.join();
  if (hooks::recycling()) {
    // At least one allocation and one free met the busy depot (the first allocation, and the
    // first free with both magazines full).
    EXPECT_GE(fallbacks, 2u);
  } else {
    EXPECT_EQ(fallbacks, 0u);  // no depot without recycling (AddressSanitizer builds)
  }
  // The depot works again: blocks made and freed after it are intact.
  ping_pong_blocks<8>(17);
}

TEST(TaskMemory, OverAlignedTasksKeepTheirAlignment) {
  std::vector<over_aligned*> ts;
  for (int i = 0; i < 100; ++i) {
    ts.push_back(new over_aligned);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ts.back()) % 64, 0u);
  }
  for (auto* t : ts) t->destroy();
}

// Short-lived threads that only free, only allocate, or both, leave their lists to the depot
// when they exit; blocks from there are good for the next threads.
TEST(TaskMemory, ThreadsExitingHandTheirBlocksOn) {
  const int rounds = stress_iterations(50);
  for (int r = 0; r < rounds; ++r) {
    std::vector<sized<16>*> made(300);
    std::thread maker([&] {
      for (auto& t : made) t = new sized<16>(7);
    });
    maker.join();
    std::thread freer([&] {
      for (auto* t : made) {
        EXPECT_TRUE(t->intact(7));
        t->destroy();
      }
    });
    freer.join();
    std::thread both([&] {
      std::vector<sized<16>*> again;
      for (int i = 0; i < 300; ++i) again.push_back(new sized<16>(9));
      std::set<const void*> distinct(again.begin(), again.end());
      EXPECT_EQ(distinct.size(), again.size());
      for (auto* t : again) {
        EXPECT_TRUE(t->intact(9));
        t->destroy();
      }
    });
    both.join();
  }
}

// A producer far ahead of its consumer: the consumer frees more than the depot keeps (4 MiB
// per class, 131,072 blocks of the 32-byte class), so whole magazines' blocks go back to the
// global operator; what the depot did keep serves the next round, distinct and writable. (The
// producer's ring, once it has one, serves one lap of blocks; the rest come from magazines.)
TEST(TaskMemory, MoreFreedThanTheDepotKeeps) {
  namespace tm = spool::detail::task_memory_testing;
  const std::size_t count = tm::ring_after() + tm::ring_capacity(sizeof(sized<8>)) + 200'000;
  for (int round = 0; round < 2; ++round) {
    const auto seed = static_cast<std::uint8_t>(round + 1);
    std::vector<sized<8>*> made(count);
    for (auto& t : made) t = new sized<8>(seed);
    std::set<const void*> distinct(made.begin(), made.end());
    ASSERT_EQ(distinct.size(), made.size()) << "a block handed out twice";
    std::thread freer([&] {
      for (auto* t : made) {
        EXPECT_TRUE(t->intact(seed));
        t->destroy();
      }
    });
    freer.join();
  }
}

// A thread that allocates far more than it frees (a producer) gets a ring: its blocks then come
// in address order, each distinct from every block still alive.
TEST(TaskMemory, ProducerGetsBlocksInAddressOrder) {
  namespace tm = spool::detail::task_memory_testing;
  if (!tm::recycling()) GTEST_SKIP() << "no recycling under AddressSanitizer";
  std::size_t count = 0;
  std::thread producer([&] {
    const std::size_t before_ring = tm::ring_after();
    std::vector<sized<8>*> made;
    for (std::size_t i = 0; i < before_ring + 1'000; ++i) made.push_back(new sized<8>(5));
    std::vector<sized<8>*> tail(made.end() - 500, made.end());
    for (std::size_t i = 1; i < tail.size(); ++i) {
      ASSERT_TRUE(tm::in_ring(tail[i]));
      ASSERT_GT(reinterpret_cast<std::uintptr_t>(tail[i]),
                reinterpret_cast<std::uintptr_t>(tail[i - 1]));
    }
    std::set<const void*> distinct(made.begin(), made.end());
    EXPECT_EQ(distinct.size(), made.size());
    for (auto* t : made) {
      EXPECT_TRUE(t->intact(5));
      t->destroy();
    }
    count = made.size();
  });
  producer.join();
  EXPECT_GT(count, 0u);
}

// A producer laps its ring while some of its blocks are still alive (held by the consumer for a
// long time, as a slow task would be): those are passed over, never handed out again until
// freed, and everything else is recycled. Two laps, so every block is reused at least once.
TEST(TaskMemory, LappedRingPassesOverBlocksInUse) {
  namespace tm = spool::detail::task_memory_testing;
  if (!tm::recycling()) GTEST_SKIP() << "no recycling under AddressSanitizer";
  const std::size_t total = tm::ring_after() + 2 * tm::ring_capacity(sizeof(sized<8>)) + 1'000;
  constexpr std::size_t batch = 1'000;
  std::vector<sized<8>*> handoff;
  // The consumer's long-lived blocks (every 997th), with the round that made them.
  std::vector<std::pair<sized<8>*, std::uint8_t>> held;
  std::barrier sync(2);
  const std::size_t rounds = total / batch;
  std::thread consumer([&] {
    std::size_t seen = 0;
    for (std::size_t r = 0; r < rounds; ++r) {
      sync.arrive_and_wait();  // `handoff` is full
      const auto seed = static_cast<std::uint8_t>(r);
      for (auto* t : handoff) {
        EXPECT_TRUE(t->intact(seed));
        if (++seen % 997 == 0) {
          held.emplace_back(t, seed);
        } else {
          t->destroy();
        }
      }
      handoff.clear();
      sync.arrive_and_wait();  // `handoff` is empty
    }
  });
  std::size_t from_ring = 0;
  for (std::size_t r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < batch; ++i) {
      auto* t = new sized<8>(static_cast<std::uint8_t>(r));
      from_ring += tm::in_ring(t) ? 1 : 0;
      handoff.push_back(t);
    }
    sync.arrive_and_wait();
    sync.arrive_and_wait();
  }
  consumer.join();
  // The held blocks were never reissued: each keeps the pattern of the round that made it.
  std::set<const void*> distinct;
  for (auto [t, seed] : held) {
    EXPECT_TRUE(distinct.insert(t).second);
    EXPECT_TRUE(t->intact(seed)) << "a held block was handed out again";
    t->destroy();
  }
  EXPECT_GT(from_ring, tm::ring_capacity(sizeof(sized<8>)));
}

// A producer's thread exits while blocks of its ring are still alive. The ring goes to the
// next thread that asks for one; that thread never receives the blocks still alive.
TEST(TaskMemory, RingOutlivesItsThread) {
  namespace tm = spool::detail::task_memory_testing;
  if (!tm::recycling()) GTEST_SKIP() << "no recycling under AddressSanitizer";
  const int rounds = stress_iterations(4);
  for (int r = 0; r < rounds; ++r) {
    std::vector<sized<16>*> first;
    std::thread a([&] {
      for (std::size_t i = 0; i < tm::ring_after() + 2'000; ++i) first.push_back(new sized<16>(1));
    });
    a.join();
    // Free all but the last 1,000 (ring blocks, alive while the next thread takes rings).
    std::vector<sized<16>*> alive(first.end() - 1'000, first.end());
    first.resize(first.size() - 1'000);
    for (auto* t : first) t->destroy();
    std::size_t ring_blocks_alive = 0;
    for (auto* t : alive) ring_blocks_alive += tm::in_ring(t) ? 1 : 0;
    EXPECT_EQ(ring_blocks_alive, alive.size());
    std::set<const void*> taken(alive.begin(), alive.end());
    std::thread b([&] {
      std::vector<sized<16>*> second;
      for (std::size_t i = 0; i < tm::ring_after() + tm::ring_capacity(sizeof(sized<16>)); ++i) {
        auto* t = new sized<16>(2);
        ASSERT_EQ(taken.count(t), 0u) << "a block still alive was handed out again";
        second.push_back(t);
      }
      for (auto* t : second) {
        EXPECT_TRUE(t->intact(2));
        t->destroy();
      }
    });
    b.join();
    for (auto* t : alive) {
      EXPECT_TRUE(t->intact(1));
      t->destroy();
    }
  }
}

TEST(TaskMemory, NothrowNewGivesAUsableBlock) {
  auto* t = new (std::nothrow) sized<24>(3);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->intact(3));
  t->destroy();
}

}  // namespace
