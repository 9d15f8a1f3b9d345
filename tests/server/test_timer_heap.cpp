// The event loops' timer heap (server/event/timer_heap.hpp): objects come out earliest first,
// arming moves a deadline only earlier, disarming takes an object out from anywhere, and a
// random mix of operations agrees with a plain ordered reference.
#include "event/timer_heap.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <vector>

namespace spoold {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct item {
  int id = 0;
  timer_node timer;
};

const clock::time_point t0 = clock::time_point() + std::chrono::hours(1);

TEST(TimerHeap, EmptyHasNoDeadlineAndNothingDue) {
  timer_heap<item> h;
  EXPECT_EQ(h.next(), clock::time_point::max());
  EXPECT_EQ(h.pop_due(clock::time_point::max()), nullptr);
  EXPECT_EQ(h.size(), 0u);
}

TEST(TimerHeap, PopsEarliestFirstAndOnlyWhenDue) {
  timer_heap<item> h;
  std::vector<item> items(5);
  const int order[] = {3, 1, 4, 0, 2};
  for (int i = 0; i < 5; ++i) {
    items[i].id = i;
    h.arm(items[i], t0 + milliseconds(10 * order[i]));
  }
  EXPECT_EQ(h.next(), t0);
  EXPECT_EQ(h.pop_due(t0 - milliseconds(1)), nullptr);
  std::vector<int> got;
  while (item* it = h.pop_due(t0 + milliseconds(40))) {
    EXPECT_FALSE(it->timer.armed());
    got.push_back(order[it->id]);
  }
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(h.size(), 0u);
}

TEST(TimerHeap, ArmMovesEarlierButNeverLater) {
  timer_heap<item> h;
  item a, b;
  h.arm(a, t0 + milliseconds(50));
  h.arm(b, t0 + milliseconds(40));
  h.arm(a, t0 + milliseconds(10));  // earlier: moves
  EXPECT_EQ(a.timer.at, t0 + milliseconds(10));
  EXPECT_EQ(h.next(), t0 + milliseconds(10));
  h.arm(a, t0 + milliseconds(90));  // later: stays, fires early
  EXPECT_EQ(a.timer.at, t0 + milliseconds(10));
  EXPECT_EQ(h.pop_due(t0 + milliseconds(10)), &a);
  h.arm(a, t0 + milliseconds(90));  // unarmed now: the true deadline
  EXPECT_EQ(h.pop_due(t0 + milliseconds(50)), &b);
  EXPECT_EQ(h.next(), t0 + milliseconds(90));
}

TEST(TimerHeap, MaxArmsNothingAndDisarmIsIdempotent) {
  timer_heap<item> h;
  item a;
  h.arm(a, clock::time_point::max());
  EXPECT_FALSE(a.timer.armed());
  h.disarm(a);
  h.arm(a, t0);
  EXPECT_TRUE(a.timer.armed());
  h.disarm(a);
  h.disarm(a);
  EXPECT_FALSE(a.timer.armed());
  EXPECT_EQ(h.size(), 0u);
}

// Random arms (earlier, later, fresh), disarms and pops against a reference of each object's
// armed deadline; after every step the heap's earliest equals the reference's.
TEST(TimerHeap, AgreesWithAReferenceUnderRandomOperations) {
  constexpr int objects = 64;
  constexpr int steps = 20000;
  std::mt19937 rng(12345);
  timer_heap<item> h;
  std::vector<item> items(objects);
  std::map<int, clock::time_point> armed;  // id -> deadline
  for (int i = 0; i < objects; ++i) items[i].id = i;
  clock::time_point now = t0;
  for (int step = 0; step < steps; ++step) {
    item& it = items[rng() % objects];
    switch (rng() % 4) {
      case 0:
      case 1: {
        const auto at = now + milliseconds(rng() % 1000);
        h.arm(it, at);
        auto [pos, fresh] = armed.try_emplace(it.id, at);
        if (!fresh && at < pos->second) pos->second = at;
        break;
      }
      case 2:
        h.disarm(it);
        armed.erase(it.id);
        break;
      default: {
        now += milliseconds(rng() % 50);
        while (item* due = h.pop_due(now)) {
          auto pos = armed.find(due->id);
          ASSERT_NE(pos, armed.end());
          ASSERT_LE(pos->second, now);
          armed.erase(pos);
        }
        for (const auto& [id, at] : armed) ASSERT_GT(at, now);
      }
    }
    ASSERT_EQ(h.size(), armed.size());
    auto earliest = clock::time_point::max();
    for (const auto& [id, at] : armed) earliest = std::min(earliest, at);
    ASSERT_EQ(h.next(), earliest);
    for (const auto& [id, at] : armed) ASSERT_EQ(items[id].timer.at, at);
  }
}

}  // namespace
}  // namespace spoold
