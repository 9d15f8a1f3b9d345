// The work-stealing deque alone: order, growth, and the owner/thief race for the last element;
// batch stealing from a push-only deque (a producer slot) and the stolen_batch it fills.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <deque>
#include <thread>
#include <vector>

#include "queues/stolen_batch.hpp"
#include "queues/ws_deque.hpp"
#include "stress_scale.hpp"

namespace {

using spool::detail::stolen_batch;
using spool::detail::work_item;
using spool::detail::ws_deque;

// A task that only carries an id; the deque never runs tasks.
struct tag final : work_item {
  explicit tag(int i) : id(i) {}
  spool::detail::outcome run(spool::detail::core&) noexcept override {
    return spool::detail::outcome::completed;
  }
  void cancel() noexcept override {}
  void destroy() noexcept override {}
  int id;
};

int id_of(work_item* t) { return static_cast<tag*>(t)->id; }

// Tags 0..count-1 for one round of a race, and how often each was taken.
struct tagged_round {
  explicit tagged_round(int count) : taken(static_cast<std::size_t>(count)) {
    for (int i = 0; i < count; ++i) tags.emplace_back(i);
  }
  tag* operator[](int i) { return &tags[static_cast<std::size_t>(i)]; }
  void took(work_item* t) { taken[static_cast<std::size_t>(id_of(t))].fetch_add(1); }
  void expect_each_taken_once(int round) const {
    for (std::size_t i = 0; i < taken.size(); ++i) {
      ASSERT_EQ(taken[i].load(), 1) << "element " << i << " round " << round;
    }
  }
  std::deque<tag> tags;
  std::vector<std::atomic<int>> taken;
};

TEST(WsDeque, OwnerPopsNewestFirstThiefStealsOldest) {
  ws_deque d(4);
  std::deque<tag> tags;
  for (int i = 0; i < 3; ++i) tags.emplace_back(i);
  for (auto& t : tags) d.push(&t);
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(id_of(d.steal().item), 0);
  EXPECT_EQ(id_of(d.pop()), 2);
  EXPECT_EQ(id_of(d.pop()), 1);
  EXPECT_EQ(d.pop(), nullptr);
  auto r = d.steal();
  EXPECT_EQ(r.item, nullptr);
  EXPECT_FALSE(r.retry);
  EXPECT_TRUE(d.empty());
}

// Pushing past the initial capacity grows the ring and keeps every element, in order.
TEST(WsDeque, GrowsAndKeepsOrder) {
  ws_deque d(2);
  std::deque<tag> tags;
  for (int i = 0; i < 1000; ++i) tags.emplace_back(i);
  for (int i = 0; i < 500; ++i) d.push(&tags[i]);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(id_of(d.steal().item), i);
  for (int i = 500; i < 1000; ++i) d.push(&tags[i]);
  EXPECT_EQ(d.size(), 900u);
  for (int i = 999; i >= 100; --i) EXPECT_EQ(id_of(d.pop()), i);
  EXPECT_EQ(d.pop(), nullptr);
}

// The owner pushes and pops while thieves steal; every element is taken exactly once. The
// owner's pops race the thieves for the last element again and again.
TEST(WsDeque, StealRacingPopTakesEachElementOnce) {
  const int rounds = stress_iterations(200);
  constexpr int per_round = 512;
  constexpr int thieves = 3;
  for (int round = 0; round < rounds; ++round) {
    ws_deque d(8);
    tagged_round tags(per_round);
    std::atomic<bool> owner_done{false};
    std::barrier start(thieves + 1);

    auto take = [&](work_item* t) { tags.took(t); };
    std::vector<std::thread> ts;
    for (int k = 0; k < thieves; ++k) {
      ts.emplace_back([&] {
        start.arrive_and_wait();
        for (;;) {
          auto r = d.steal();
          if (r.item != nullptr) {
            take(r.item);
          } else if (!r.retry && owner_done.load()) {
            return;
          }
        }
      });
    }
    start.arrive_and_wait();
    for (int i = 0; i < per_round; ++i) {
      d.push(tags[i]);
      if (i % 3 == 0) {
        if (work_item* t = d.pop()) take(t);
      }
    }
    while (work_item* t = d.pop()) take(t);
    owner_done.store(true);
    for (auto& t : ts) t.join();
    tags.expect_each_taken_once(round);
  }
}

// A producer only pushes (as into a producer slot) while thieves take runs with steal_batch,
// across ring growth: every element is taken exactly once, and each run is a contiguous,
// ascending stretch.
TEST(WsDeque, StealBatchTakesContiguousRunsEachElementOnce) {
  const int rounds = stress_iterations(100);
  constexpr int per_round = 2048;
  constexpr int thieves = 3;
  for (int round = 0; round < rounds; ++round) {
    ws_deque d(8);
    tagged_round tags(per_round);
    std::atomic<int> runs_not_contiguous{0};
    std::atomic<bool> producer_done{false};
    std::barrier start(thieves + 1);
    std::vector<std::thread> ts;
    for (int k = 0; k < thieves; ++k) {
      ts.emplace_back([&] {
        start.arrive_and_wait();
        work_item* run[stolen_batch::k_capacity];
        for (;;) {
          // Read before the attempt: an empty deque seen after the producer finished is
          // empty for good.
          const bool done = producer_done.load();
          auto [count, retry] = d.steal_batch(run, stolen_batch::k_capacity);
          for (std::uint32_t i = 0; i < count; ++i) {
            tags.took(run[i]);
            if (i > 0 && id_of(run[i]) != id_of(run[i - 1]) + 1) runs_not_contiguous.fetch_add(1);
          }
          if (count == 0 && !retry && done) return;
        }
      });
    }
    start.arrive_and_wait();
    for (int i = 0; i < per_round; ++i) d.push(tags[i]);
    producer_done.store(true);
    for (auto& t : ts) t.join();
    EXPECT_EQ(runs_not_contiguous.load(), 0);
    tags.expect_each_taken_once(round);
  }
}

TEST(StolenBatch, HolderAndTakersShareOneFrontOldestFirst) {
  stolen_batch b;
  std::deque<tag> tags;
  for (int i = 0; i < 40; ++i) tags.emplace_back(i);
  work_item* run[stolen_batch::k_capacity];
  for (std::uint32_t i = 0; i < stolen_batch::k_capacity; ++i) run[i] = &tags[i];
  const int source = 0;
  b.fill(&source, run, stolen_batch::k_capacity);
  EXPECT_EQ(b.size(), stolen_batch::k_capacity);
  EXPECT_EQ(b.source(), &source);
  for (std::uint32_t i = 0; i < stolen_batch::k_capacity; ++i) {
    EXPECT_EQ(id_of(b.take().item), static_cast<int>(i));
  }
  auto r = b.take();
  EXPECT_EQ(r.item, nullptr);
  EXPECT_FALSE(r.retry);
  // Refilled after it ran dry, past the end of the ring's indices: still oldest first.
  for (int i = 0; i < 8; ++i) run[i] = &tags[32 + static_cast<std::size_t>(i)];
  b.fill(&source, run, 8);
  for (int i = 32; i < 40; ++i) EXPECT_EQ(id_of(b.take().item), i);
  EXPECT_TRUE(b.empty());
}

// The holder refills whenever the batch runs dry while takers race it for every entry: each
// entry is taken exactly once, and each taker sees ascending ids (one front, oldest first).
TEST(StolenBatch, RefillsRacingTakersHandOutEachEntryOnce) {
  const int rounds = stress_iterations(100);
  constexpr int per_round = 4096;
  constexpr int takers = 3;
  for (int round = 0; round < rounds; ++round) {
    stolen_batch b;
    tagged_round tags(per_round);
    std::atomic<int> out_of_order{0};
    std::atomic<bool> holder_done{false};
    std::barrier start(takers + 1);
    auto take_one = [&](int& last) {
      auto r = b.take();
      if (r.item != nullptr) {
        const int id = id_of(r.item);
        tags.took(r.item);
        if (id <= last) out_of_order.fetch_add(1);
        last = id;
      }
      return r;
    };
    std::vector<std::thread> ts;
    for (int k = 0; k < takers; ++k) {
      ts.emplace_back([&] {
        start.arrive_and_wait();
        int last = -1;
        for (;;) {
          auto r = take_one(last);
          if (r.item == nullptr && !r.retry && holder_done.load()) return;
        }
      });
    }
    start.arrive_and_wait();
    const int source = 0;
    int last = -1;
    work_item* run[stolen_batch::k_capacity];
    for (int next = 0; next < per_round;) {
      if (!b.empty()) {  // only the holder fills, and only an empty batch
        take_one(last);
        continue;
      }
      const int n =
          std::min<int>(per_round - next, 1 + next % static_cast<int>(stolen_batch::k_capacity));
      for (int i = 0; i < n; ++i) run[i] = tags[next + i];
      b.fill(&source, run, static_cast<std::uint32_t>(n));
      next += n;
    }
    holder_done.store(true);
    for (;;) {  // what the takers left
      auto r = take_one(last);
      if (r.item == nullptr && !r.retry) break;
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(out_of_order.load(), 0);
    tags.expect_each_taken_once(round);
  }
}

}  // namespace
