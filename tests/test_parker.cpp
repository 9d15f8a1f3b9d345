// The parker's protocol alone, park racing wake: a consumer that follows prepare / check /
// park never sleeps through a flag set by a producer that follows set / notify.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "parker.hpp"
#include "stress_scale.hpp"

namespace {

using spool::detail::parker;

// Ping-pong through two parkers: each side waits for its turn with the full protocol. A lost
// wake-up hangs the test, and the watchdog fails it.
TEST(Parker, PingPongLosesNoWakeUp) {
  const int rounds = stress_iterations(100000);
  parker p[2];
  std::atomic<int> turn{0};
  auto wait_for_turn = [&](int me, int value) {
    while (turn.load(std::memory_order_acquire) != value) {
      std::uint32_t key = p[me].prepare();
      if (turn.load(std::memory_order_seq_cst) == value) {
        p[me].cancel();
        break;
      }
      p[me].park(key);
    }
  };
  std::thread other([&] {
    for (int i = 0; i < rounds; ++i) {
      wait_for_turn(1, 2 * i + 1);
      turn.store(2 * i + 2, std::memory_order_release);
      p[0].notify_one();
    }
  });
  for (int i = 0; i < rounds; ++i) {
    wait_for_turn(0, 2 * i);
    turn.store(2 * i + 1, std::memory_order_release);
    p[1].notify_one();
  }
  wait_for_turn(0, 2 * rounds);
  other.join();
  EXPECT_EQ(turn.load(), 2 * rounds);
}

// Many sleepers, one notify_all: every one of them wakes.
TEST(Parker, NotifyAllWakesEverySleeper) {
  const int rounds = stress_iterations(2000);
  for (int r = 0; r < rounds; ++r) {
    parker p;
    std::atomic<bool> go{false};
    std::atomic<int> awake{0};
    std::thread ts[4];
    for (auto& t : ts) {
      t = std::thread([&] {
        while (!go.load(std::memory_order_acquire)) {
          std::uint32_t key = p.prepare();
          if (go.load(std::memory_order_seq_cst)) {
            p.cancel();
            break;
          }
          p.park(key);
        }
        awake.fetch_add(1);
      });
    }
    go.store(true, std::memory_order_release);
    p.notify_all();
    for (auto& t : ts) t.join();
    ASSERT_EQ(awake.load(), 4);
    EXPECT_EQ(p.sleepers(), 0u);
  }
}

// A timed park with nobody to wake it returns false after the deadline (the timeout path).
TEST(Parker, ParkUntilTimesOut) {
  parker p;
  std::uint32_t key = p.prepare();
  EXPECT_FALSE(p.park_until(key, std::chrono::steady_clock::now() + std::chrono::milliseconds(2)));
  EXPECT_EQ(p.sleepers(), 0u);
}

}  // namespace
