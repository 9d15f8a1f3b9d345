// Priorities: high runs before normal before low, FIFO within a level, from outside the pool
// and from inside it; aging keeps low (and normal, under a flood of high) from starving; the
// full-queue and shutdown paths treat every level alike.
#include <gtest/gtest.h>

#include <spool/spool.h>
#include <spool/spool.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using namespace std::chrono_literals;
using spool::priority;

class order_log {
 public:
  void add(std::string s) {
    std::lock_guard lock(mu_);
    seen_.push_back(std::move(s));
  }
  std::vector<std::string> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> seen_;
};

spool::config one_thread(std::size_t capacity = 0) {
  spool::config cfg = spool_test::pool_config(1, capacity);
  cfg.aging = 0ns;  // strict priorities
  return cfg;
}

const char* level_name(priority p) {
  return p == priority::high ? "H" : p == priority::normal ? "N" : "L";
}

// Submits L0 N0 H0 L1 N1 H1 ... while the only worker is held, then expects H*, N*, L*.
void expect_levels_in_order(spool::pool& pool,
                            std::function<void(priority, std::function<void()>)> submit) {
  std::latch started(1), release(1);
  spool_test::hold_workers(pool, started, release);
  order_log log;
  for (int i = 0; i < 5; ++i) {
    for (priority p : {priority::low, priority::normal, priority::high}) {
      std::string name = level_name(p) + std::to_string(i);
      submit(p, [&log, name] { log.add(name); });
    }
  }
  release.count_down();
  pool.wait_idle();
  const std::vector<std::string> want = {"H0", "H1", "H2", "H3", "H4", "N0", "N1", "N2",
                                         "N3", "N4", "L0", "L1", "L2", "L3", "L4"};
  EXPECT_EQ(log.seen(), want);
}

TEST(Priority, LevelsRunInOrderFifoWithinALevelUnbounded) {
  spool::pool pool{one_thread()};
  expect_levels_in_order(pool,
                         [&](priority p, std::function<void()> f) { pool.post(p, std::move(f)); });
}

TEST(Priority, LevelsRunInOrderFifoWithinALevelBounded) {
  spool::pool pool{one_thread(64)};
  expect_levels_in_order(pool,
                         [&](priority p, std::function<void()> f) { pool.post(p, std::move(f)); });
}

TEST(Priority, FuturesCarryPriorityToo) {
  spool::pool pool{one_thread()};
  std::latch started(1), release(1);
  spool_test::hold_workers(pool, started, release);
  std::atomic<int> clock{0};
  auto low = pool.submit(priority::low, [&] { return clock.fetch_add(1); });
  auto normal = pool.submit([&] { return clock.fetch_add(1); });
  auto high = pool.submit(
      priority::high, [&](int x) { return clock.fetch_add(x); }, 1);
  release.count_down();
  // The worker alone runs the three: a get() here could run `normal` on this thread (an outside
  // waiter runs its own task) while the worker runs `low`.
  pool.wait_idle();
  EXPECT_EQ(high.get(), 0);
  EXPECT_EQ(normal.get(), 1);
  EXPECT_EQ(low.get(), 2);
}

// From inside a task: normal work goes to the worker's own deque, the other levels to the
// shared queue; the order still holds once the submitting task returns.
TEST(Priority, LevelsRunInOrderWhenSubmittedFromATask) {
  spool::pool pool{one_thread()};
  order_log log;
  pool.post([&] {
    for (int i = 0; i < 3; ++i) {
      for (priority p : {priority::low, priority::normal, priority::high}) {
        std::string name = level_name(p) + std::to_string(i);
        pool.post(p, [&log, name] { log.add(name); });
      }
    }
  });
  pool.wait_idle();
  // Normal work on the worker's own deque runs newest first (LIFO, as recursive work should).
  const std::vector<std::string> want = {"H0", "H1", "H2", "N2", "N1", "N0", "L0", "L1", "L2"};
  EXPECT_EQ(log.seen(), want);
}

// A chain of normal tasks that resubmit themselves until the low task has run: with aging,
// the low task gets its turn (without it this would never end; the watchdog would fail it).
TEST(Priority, AgingLetsLowRunUnderEndlessNormalWork) {
  spool::config cfg = spool_test::pool_config(1);
  cfg.aging = 1ms;
  spool::pool pool{cfg};
  std::atomic<bool> low_ran{false};
  std::atomic<long> chain{0};
  std::function<void()> link = [&] {
    chain.fetch_add(1, std::memory_order_relaxed);
    if (!low_ran.load()) pool.post(link);
  };
  std::latch started(1), release(1);
  spool_test::hold_workers(pool, started, release);
  pool.post(priority::low, [&] { low_ran.store(true); });
  pool.post(link);
  release.count_down();
  pool.wait_idle();
  EXPECT_TRUE(low_ran.load());
  EXPECT_GT(chain.load(), 0);
}

TEST(Priority, AgingLetsNormalRunUnderEndlessHighWork) {
  spool::config cfg = spool_test::pool_config(1);
  cfg.aging = 1ms;
  spool::pool pool{cfg};
  std::atomic<bool> normal_ran{false};
  std::function<void()> link = [&] {
    if (!normal_ran.load()) pool.post(priority::high, link);
  };
  std::latch started(1), release(1);
  spool_test::hold_workers(pool, started, release);
  pool.post([&] { normal_ran.store(true); });
  pool.post(priority::high, link);
  release.count_down();
  pool.wait_idle();
  EXPECT_TRUE(normal_ran.load());
}

// discard_oldest evicts the oldest task of the lowest non-empty level.
TEST(Priority, DiscardOldestEvictsTheLowestLevelFirst) {
  spool::config cfg = one_thread(2);
  cfg.on_full = spool::full_policy::discard_oldest;
  spool::pool pool{cfg};
  std::latch started(1), release(1);
  spool_test::hold_workers(pool, started, release);
  auto high = pool.submit(priority::high, [] { return 1; });
  auto low = pool.submit(priority::low, [] { return 2; });
  auto normal = pool.submit([] { return 3; });  // full: evicts the low one
  EXPECT_EQ(spool_test::error_code_of([&] { low.get(); }), spool::errc::cancelled);
  release.count_down();
  EXPECT_EQ(high.get(), 1);
  EXPECT_EQ(normal.get(), 3);
}

TEST(Priority, ShutdownDiscardDropsEveryLevel) {
  spool::pool pool{one_thread()};
  std::latch started(1), release(1);
  spool_test::hold_workers(pool, started, release);
  std::atomic<int> ran{0};
  std::vector<spool::future<void>> queued;
  for (priority p : {priority::low, priority::normal, priority::high}) {
    for (int i = 0; i < 4; ++i) queued.push_back(pool.submit(p, [&] { ran.fetch_add(1); }));
  }
  std::thread stopper([&] { EXPECT_EQ(pool.shutdown(spool::shutdown_mode::discard), 12u); });
  // Each get() returns once the stopper has dropped that task; the held worker then goes.
  for (auto& f : queued)
    EXPECT_EQ(spool_test::error_code_of([&] { f.get(); }), spool::errc::cancelled);
  release.count_down();
  stopper.join();
  EXPECT_EQ(ran.load(), 0);
}

TEST(Priority, CApi) {
  spool_pool* pool = nullptr;
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 1;
  cfg.aging_ms = 0;
  ASSERT_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  struct ctx {
    std::latch started{1};
    std::latch release{1};
    std::mutex mu;
    std::vector<int> order;
  } c;
  ASSERT_EQ(spool_submit(
                pool,
                [](void* a) {
                  auto* x = static_cast<ctx*>(a);
                  x->started.count_down();
                  x->release.wait();
                },
                &c),
            SPOOL_OK);
  c.started.wait();
  struct item {
    ctx* c;
    int level;
  };
  item items[3] = {
      {&c, SPOOL_PRIORITY_LOW}, {&c, SPOOL_PRIORITY_NORMAL}, {&c, SPOOL_PRIORITY_HIGH}};
  for (item& it : items) {
    ASSERT_EQ(spool_submit_priority(
                  pool, it.level,
                  [](void* a) {
                    auto* i = static_cast<item*>(a);
                    std::lock_guard lock(i->c->mu);
                    i->c->order.push_back(i->level);
                  },
                  &it, nullptr),
              SPOOL_OK);
  }
  EXPECT_EQ(spool_submit_priority(
                pool, 7, [](void*) {}, nullptr, nullptr),
            SPOOL_EINVAL);
  EXPECT_EQ(spool_submit_priority(
                pool, -1, [](void*) {}, nullptr, nullptr),
            SPOOL_EINVAL);
  c.release.count_down();
  ASSERT_EQ(spool_wait_idle(pool), SPOOL_OK);
  EXPECT_EQ(c.order,
            (std::vector<int>{SPOOL_PRIORITY_HIGH, SPOOL_PRIORITY_NORMAL, SPOOL_PRIORITY_LOW}));
  ASSERT_EQ(spool_destroy(pool), SPOOL_OK);
}

}  // namespace
