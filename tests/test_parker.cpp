// The parker's protocol alone, park racing wake: a consumer that follows prepare / check /
// park never sleeps through a flag set by a producer that follows set / notify; and a
// sleeper chosen by notify_one is counted as a spinner until it gives that back.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "sleep/parker.hpp"
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
    bool searching = false;
    while (turn.load(std::memory_order_acquire) != value) {
      if (searching) {  // chosen by notify_one: looked once, now stop as a spinner would
        searching = false;
        p[me].stop_spinning();
        continue;
      }
      p[me].prepare(0);
      if (turn.load(std::memory_order_seq_cst) == value) {
        p[me].cancel(0);
        break;
      }
      searching = p[me].park(0) == parker::wake::searching;
    }
    if (searching) p[me].stop_spinning();
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
    parker p(4);
    std::atomic<bool> go{false};
    std::atomic<int> awake{0};
    std::thread ts[4];
    for (std::uint32_t seat = 0; seat < 4; ++seat) {
      ts[seat] = std::thread([&, seat] {
        while (!go.load(std::memory_order_acquire)) {
          p.prepare(seat);
          if (go.load(std::memory_order_seq_cst)) {
            p.cancel(seat);
            break;
          }
          EXPECT_EQ(p.park(seat), parker::wake::woken);
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
  p.prepare(0);
  EXPECT_EQ(p.park_until(0, std::chrono::steady_clock::now() + std::chrono::milliseconds(2)),
            parker::wake::timed_out);
  EXPECT_EQ(p.sleepers(), 0u);
}

// notify_one takes the sleeper off the list before it wakes, and counts it as a spinner: a
// second notify finds nobody to wake and makes no futex call, however late the first sleeper
// runs. Once the sleeper stops spinning, the next notify wakes the other sleeper.
TEST(Parker, ChosenSleeperIsCountedOnceAndSearches) {
  parker p(2, 1);
  p.prepare(0);
  p.prepare(1);
  ASSERT_EQ(p.sleepers(), 2u);
  p.notify_one();  // chooses seat 1, the most recent
  EXPECT_EQ(p.sleepers(), 1u);
  p.notify_one();  // a spinner is counted: nobody else is chosen
  EXPECT_EQ(p.sleepers(), 1u);
  EXPECT_EQ(p.park(1), parker::wake::searching);  // returns at once: already chosen
  EXPECT_FALSE(p.try_start_spinning());           // its spinner's count fills max_spinners
  p.stop_spinning();
  p.notify_one();  // now seat 0
  EXPECT_EQ(p.sleepers(), 0u);
  // Seat 0 withdraws after being chosen: cancel reports it and gives the spinner's count back.
  EXPECT_TRUE(p.cancel(0));
  EXPECT_TRUE(p.try_start_spinning());
  p.stop_spinning();
}

// A timed park that a notify_one chooses just as the deadline passes reports the wake, never
// both: the seat is either still listed (timed out, and gone from the list) or chosen.
TEST(Parker, ParkUntilRacingNotifyIsWokenOrTimedOutExactlyOnce) {
  const int rounds = stress_iterations(2000);
  for (int r = 0; r < rounds; ++r) {
    parker p;
    p.prepare(0);
    std::thread waker([&] { p.notify_one(); });
    const parker::wake how = p.park_until(0, std::chrono::steady_clock::now());
    waker.join();
    ASSERT_EQ(p.sleepers(), 0u);
    if (how == parker::wake::searching) {
      p.stop_spinning();
    } else {
      ASSERT_EQ(how, parker::wake::timed_out);
    }
    // Whatever happened, the spinner count is back to zero.
    ASSERT_TRUE(p.try_start_spinning());
    p.stop_spinning();
  }
}

// notify_all wakes every thread that was asleep when it was called, even while others are
// arriving: each round, every waiter sleeps until the round number moves, then acknowledges;
// the notifier waits for all the acknowledgements of a round, then moves the number and
// calls notify_all while the waiters are still on their way back to sleep. A sleeper left
// behind never acknowledges, and the test hangs (watchdog).
TEST(Parker, NotifyAllReachesEarlierSleepersWhileOthersArrive) {
  const int rounds = stress_iterations(20000);
  constexpr std::uint32_t waiters = 4;
  parker p(waiters);
  std::atomic<int> round{0};
  std::atomic<int> acks{0};
  std::vector<std::thread> ts;
  for (std::uint32_t seat = 0; seat < waiters; ++seat) {
    ts.emplace_back([&, seat] {
      for (int r = 1; r <= rounds; ++r) {
        while (round.load(std::memory_order_acquire) < r) {
          p.prepare(seat);
          if (round.load(std::memory_order_seq_cst) >= r) {
            p.cancel(seat);
            break;
          }
          EXPECT_EQ(p.park(seat), parker::wake::woken);
        }
        acks.fetch_add(1);
      }
    });
  }
  for (int r = 1; r <= rounds; ++r) {
    round.store(r, std::memory_order_seq_cst);
    p.notify_all();
    const int want = r * static_cast<int>(waiters);
    while (acks.load() < want) std::this_thread::yield();
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(acks.load(), rounds * static_cast<int>(waiters));
  EXPECT_EQ(p.sleepers(), 0u);
}

}  // namespace
