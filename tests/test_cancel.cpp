// future::cancel(): a task that has not started never runs, its future reports
// task_cancelled, its callable is released at once and exactly once, and it is counted in
// stats::cancelled; a task that has started is not affected. The stress test races
// cancel() against workers starting the tasks (run it under ThreadSanitizer and ASan).
#include <gtest/gtest.h>
#include <spool/spool.hpp>

#include <atomic>
#include <latch>
#include <memory>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using spool_test::error_code_of;
using spool_test::gate;
using spool_test::hold_workers;
using spool_test::pool_config;

TEST(Cancel, QueuedTaskNeverRunsAndReleasesItsCallableAtOnce) {
  spool::pool pool{pool_config(1)};
  std::latch started{1};
  gate release;
  hold_workers(pool, started, release);

  auto token = std::make_shared<int>(0);
  bool ran = false;
  auto f = pool.submit([token, &ran] {
    ran = true;
    return 1;
  });
  EXPECT_EQ(token.use_count(), 2);
  EXPECT_TRUE(f.cancel());
  EXPECT_EQ(token.use_count(), 1) << "the callable is destroyed by cancel()";
  EXPECT_TRUE(f.ready());
  EXPECT_FALSE(f.cancel()) << "a second cancel() changes nothing";

  release.open();
  pool.wait_idle();
  EXPECT_FALSE(ran);
  EXPECT_EQ(pool.statistics().cancelled, 1u);
  EXPECT_EQ(pool.statistics().completed, 1u);  // the holding task
  EXPECT_THROW(f.get(), spool::task_cancelled);
}

TEST(Cancel, FinishedTaskIsNotCancelled) {
  spool::pool pool{pool_config(2)};
  auto f = pool.submit([] { return 5; });
  f.wait();
  EXPECT_FALSE(f.cancel());
  EXPECT_EQ(f.get(), 5);
  EXPECT_EQ(pool.statistics().cancelled, 0u);
}

TEST(Cancel, RunningTaskIsNotCancelled) {
  spool::pool pool{pool_config(2)};
  std::latch running{1};
  gate release;
  auto f = pool.submit([&] {
    running.count_down();
    release.wait();
    return 9;
  });
  running.wait();
  EXPECT_FALSE(f.cancel());
  release.open();
  EXPECT_EQ(f.get(), 9);
}

TEST(Cancel, EmptyFutureIsAnInvalidArgument) {
  spool::future<int> empty;
  EXPECT_EQ(error_code_of([&] { (void)empty.cancel(); }), spool::errc::invalid_argument);
}

TEST(Cancel, CancelledThenDiscardedIsDroppedOnce) {
  spool::pool pool{pool_config(1)};
  std::latch started{1};
  gate release;
  hold_workers(pool, started, release);
  std::vector<spool::future<int>> fs;
  for (int i = 0; i < 10; ++i) fs.push_back(pool.submit([i] { return i; }));
  for (int i = 0; i < 10; i += 2) EXPECT_TRUE(fs[i].cancel());
  release.open();
  pool.shutdown(spool::shutdown_mode::discard);
  // Every future is ready exactly once; the ones cancelled above report it, the others were
  // either run or dropped by the discard.
  for (int i = 0; i < 10; ++i) {
    if (i % 2 == 0) {
      EXPECT_THROW(fs[i].get(), spool::task_cancelled);
    } else {
      try {
        EXPECT_EQ(fs[i].get(), i);
      } catch (const spool::task_cancelled&) {
      }
    }
  }
  const spool::stats s = pool.statistics();
  EXPECT_EQ(s.completed + s.cancelled, 11u);
}

// cancel() races a worker taking the task: for every task exactly one side wins, the task
// runs if and only if cancel() returned false, and each callable is destroyed once.
TEST(CancelStress, CancelRacesStart) {
  spool::pool pool{pool_config(2)};
  const int rounds = stress_iterations(200);
  constexpr int batch = 64;
  auto token = std::make_shared<int>(0);
  std::uint64_t cancelled = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::atomic<int>> ran(batch);
    std::vector<spool::future<void>> fs;
    fs.reserve(batch);
    for (int i = 0; i < batch; ++i) {
      fs.push_back(pool.submit([token, &ran, i] { ran[i].fetch_add(1); }));
    }
    std::vector<bool> won(batch);
    for (int i = batch - 1; i >= 0; --i) won[i] = fs[i].cancel();
    for (int i = 0; i < batch; ++i) {
      if (won[i]) {
        ++cancelled;
        EXPECT_THROW(fs[i].get(), spool::task_cancelled);
      } else {
        fs[i].get();
      }
    }
    pool.wait_idle();
    for (int i = 0; i < batch; ++i) {
      EXPECT_EQ(ran[i].load(), won[i] ? 0 : 1) << "round " << r << " task " << i;
    }
  }
  EXPECT_EQ(token.use_count(), 1) << "every callable was destroyed";
  EXPECT_EQ(pool.statistics().cancelled, cancelled);
}

}  // namespace
