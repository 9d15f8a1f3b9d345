// Task memory (src/task_memory.cpp): blocks recycled per thread and through the shared depot.
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
#include <set>
#include <thread>
#include <vector>

#include "spool/detail/task.hpp"
#include "stress_scale.hpp"

namespace {

using spool::detail::core;
using spool::detail::outcome;
using spool::detail::task;

// A task of N payload bytes that fills them with a pattern and can check it.
template <std::size_t N>
struct sized final : task {
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

struct alignas(64) over_aligned final : task {
  outcome run(core&) noexcept override { return outcome::completed; }
  void cancel() noexcept override {}
  void destroy() noexcept override { delete this; }
  char pad[8];
};

// Producer allocates, consumer frees, in rounds; the producer checks every block it holds
// alive is distinct and keeps its pattern until it is handed over.
template <std::size_t N>
void ping_pong_blocks() {
  const int rounds = stress_iterations(200);
  constexpr int per_round = 500;  // more than a few batches, so the depot is used both ways
  std::vector<sized<N>*> handoff;
  std::barrier sync(2);
  std::thread consumer([&] {
    for (int r = 0; r < rounds; ++r) {
      sync.arrive_and_wait();  // the producer filled `handoff`
      for (auto* t : handoff) {
        EXPECT_TRUE(t->intact(static_cast<std::uint8_t>(r)));
        t->destroy();
      }
      handoff.clear();
      sync.arrive_and_wait();  // `handoff` is empty again
    }
  });
  for (int r = 0; r < rounds; ++r) {
    std::set<const void*> live;
    for (int i = 0; i < per_round; ++i) {
      auto* t = new sized<N>(static_cast<std::uint8_t>(r));
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
  ping_pong_blocks<8>();    // 32-byte class
  ping_pong_blocks<40>();   // 64
  ping_pong_blocks<100>();  // 128
  ping_pong_blocks<200>();  // 256
  ping_pong_blocks<1000>(); // past the classes: the global operator
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
// global operator; what the depot did keep serves the next round, distinct and writable.
TEST(TaskMemory, MoreFreedThanTheDepotKeeps) {
  constexpr int count = 200'000;
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

TEST(TaskMemory, NothrowNewGivesAUsableBlock) {
  auto* t = new (std::nothrow) sized<24>(3);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->intact(3));
  t->destroy();
}

}  // namespace
