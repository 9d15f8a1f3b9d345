// The work-stealing deque alone: order, growth, and the owner/thief race for the last element.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <thread>
#include <deque>
#include <vector>

#include "stress_scale.hpp"
#include "ws_deque.hpp"

namespace {

using spool::detail::task;
using spool::detail::ws_deque;

// A task that only carries an id; the deque never runs tasks.
struct tag final : task {
  explicit tag(int i) : id(i) {}
  spool::detail::outcome run(spool::detail::core&) noexcept override {
    return spool::detail::outcome::completed;
  }
  void cancel() noexcept override {}
  void destroy() noexcept override {}
  int id;
};

int id_of(task* t) { return static_cast<tag*>(t)->id; }

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
    std::deque<tag> tags;
    for (int i = 0; i < per_round; ++i) tags.emplace_back(i);
    std::vector<std::atomic<int>> taken(per_round);
    std::atomic<bool> owner_done{false};
    std::barrier start(thieves + 1);

    auto take = [&](task* t) { taken[static_cast<std::size_t>(id_of(t))].fetch_add(1); };
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
      d.push(&tags[static_cast<std::size_t>(i)]);
      if (i % 3 == 0) {
        if (task* t = d.pop()) take(t);
      }
    }
    while (task* t = d.pop()) take(t);
    owner_done.store(true);
    for (auto& t : ts) t.join();
    for (int i = 0; i < per_round; ++i) {
      ASSERT_EQ(taken[static_cast<std::size_t>(i)].load(), 1) << "element " << i << " round " << round;
    }
  }
}

}  // namespace
