// pool::statistics(): each counter, read in states made deterministic with latches. Under load
// the fields need not add up; every check here is made while the pool is held or idle.
#include <gtest/gtest.h>

#include <spool/spool.hpp>

#include <atomic>
#include <cstddef>
#include <latch>
#include <memory>
#include <stdexcept>
#include <vector>

#include "support.hpp"

namespace {

spool::config pool_config(unsigned threads, std::size_t capacity = 0,
                          spool::full_policy on_full = spool::full_policy::block) {
  spool::config cfg;
  cfg.threads = threads;
  cfg.queue_capacity = capacity;
  cfg.on_full = on_full;
  cfg.on_exception = [](std::exception_ptr) {};  // the failures below are deliberate
  return cfg;
}

// Posts a task that holds one worker at `release` (a std::latch or a spool_test::gate); returns
// once it is running.
template <class Release>
void hold_one_worker(spool::pool& p, Release& release) {
  std::latch started{1};
  p.post([&started, &release] {
    started.count_down();
    release.wait();
  });
  started.wait();
}

}  // namespace

TEST(Stats, AllZeroOnAFreshPool) {
  spool::pool p{pool_config(2)};
  spool::stats s = p.statistics();
  EXPECT_EQ(s.threads_busy, 0u);
  EXPECT_EQ(s.queued, 0u);
  EXPECT_EQ(s.submitted, 0u);
  EXPECT_EQ(s.completed, 0u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.stolen, 0u);
  EXPECT_EQ(s.cancelled, 0u);
}

// threads_busy is exactly the number of workers held in a task; threads_live counts the
// workers until shutdown() has joined them.
TEST(Stats, ThreadsBusyAndLive) {
  std::latch release{1};
  spool::pool p{pool_config(3)};
  for (unsigned held = 1; held <= 3; ++held) {
    hold_one_worker(p, release);
    EXPECT_EQ(p.statistics().threads_busy, held);
  }
  EXPECT_EQ(p.statistics().threads_live, 3u);
  release.count_down();
  p.wait_idle();
  EXPECT_EQ(p.statistics().threads_busy, 0u);
  EXPECT_EQ(p.statistics().threads_live, 3u);
  p.shutdown();
  EXPECT_EQ(p.statistics().threads_live, 0u);
}

// queued counts tasks waiting in the bounded queue and in the workers' deques.
TEST(Stats, QueuedCountsWaitingTasks) {
  std::latch release{1}, children_pushed{1}, release_parent{1};
  spool::pool p{pool_config(1)};
  hold_one_worker(p, release);
  for (int i = 0; i < 5; ++i) p.post([] {});
  EXPECT_EQ(p.statistics().queued, 5u);
  EXPECT_EQ(p.statistics().submitted, 6u);
  release.count_down();
  p.wait_idle();
  EXPECT_EQ(p.statistics().queued, 0u);
  EXPECT_EQ(p.statistics().completed, 6u);

  // Three children pushed to the only worker's deque wait there until their parent returns.
  p.post([&] {
    for (int i = 0; i < 3; ++i) p.post([] {});
    children_pushed.count_down();
    release_parent.wait();
  });
  children_pushed.wait();
  EXPECT_EQ(p.statistics().queued, 3u);
  EXPECT_EQ(p.statistics().submitted, 10u);  // submissions from workers count too
  release_parent.count_down();
  p.wait_idle();
  EXPECT_EQ(p.statistics().queued, 0u);
  EXPECT_EQ(p.statistics().completed, 10u);
}

// completed counts tasks that returned, failed those that threw, whether submitted or posted.
TEST(Stats, CompletedAndFailed) {
  spool::pool p{pool_config(2)};
  std::vector<spool::future<int>> ok, bad;
  for (int i = 0; i < 10; ++i) ok.push_back(p.submit([i] { return i; }));
  for (int i = 0; i < 5; ++i) {
    bad.push_back(p.submit([]() -> int { throw std::runtime_error("x"); }));
  }
  for (int i = 0; i < 3; ++i) p.post([] { throw std::runtime_error("y"); });
  for (int i = 0; i < 4; ++i) p.post([] {});
  p.wait_idle();
  spool::stats s = p.statistics();
  EXPECT_EQ(s.submitted, 22u);
  EXPECT_EQ(s.completed, 14u);
  EXPECT_EQ(s.failed, 8u);
  EXPECT_EQ(s.cancelled, 0u);
  EXPECT_EQ(s.rejected, 0u);
}

// rejected counts every refused submission (full, timed out, shut down); none is "submitted".
TEST(Stats, RejectedCountsEveryRefusal) {
  spool::pool p{pool_config(1, 1, spool::full_policy::reject)};
  spool_test::gate release;  // after the pool: if a post() below throws, it opens first
  hold_one_worker(p, release);
  p.post([] {});
  EXPECT_TRUE(p.try_post([] {}));
  EXPECT_TRUE(p.try_post([] {}));
  p.close();
  EXPECT_TRUE(p.try_post([] {}));
  spool::stats s = p.statistics();
  EXPECT_EQ(s.rejected, 3u);
  EXPECT_EQ(s.submitted, 2u);
  release.open();
  p.shutdown();

  spool::config cfg = pool_config(1, 1, spool::full_policy::block_for);
  cfg.block_timeout = std::chrono::milliseconds(20);
  spool::pool q{cfg};
  spool_test::gate release2;  // after q, as above
  hold_one_worker(q, release2);
  q.post([] {});
  EXPECT_EQ(q.try_post([] {}), spool::errc::timed_out);
  EXPECT_EQ(q.statistics().rejected, 1u);
  release2.open();
}

// cancelled counts exactly the tasks discard_oldest dropped.
TEST(Stats, CancelledCountsDiscardedTasks) {
  std::latch release{1};
  spool::pool p{pool_config(1, 2, spool::full_policy::discard_oldest)};
  hold_one_worker(p, release);
  for (int i = 0; i < 7; ++i) p.post([] {});
  EXPECT_EQ(p.statistics().cancelled, 5u);
  EXPECT_EQ(p.statistics().queued, 2u);
  release.count_down();
  p.wait_idle();
  spool::stats s = p.statistics();
  EXPECT_EQ(s.cancelled, 5u);
  EXPECT_EQ(s.completed, 3u);  // the holder and the two newest
  EXPECT_EQ(s.submitted, 8u);
}

// After shutdown(discard), cancelled equals what shutdown() reported dropped, and every
// accepted task either completed or was cancelled.
TEST(Stats, CancelledMatchesShutdownDiscard) {
  spool::pool p{pool_config(2)};
  for (int i = 0; i < 1000; ++i) p.post([] {});
  std::size_t dropped = p.shutdown(spool::shutdown_mode::discard);
  spool::stats s = p.statistics();
  EXPECT_EQ(s.cancelled, dropped);
  EXPECT_EQ(s.completed + s.cancelled, s.submitted);
  EXPECT_EQ(s.submitted, 1000u);
  EXPECT_EQ(s.queued, 0u);
}

// A parent pushes a child to its own deque and then blocks (without helping) until the child
// has run: only the other worker can run it, and only by stealing. Every round needs a steal.
TEST(Stats, StolenCountsRequiredSteals) {
  constexpr int rounds = 20;
  spool::pool p{pool_config(2)};
  for (int r = 0; r < rounds; ++r) {
    std::latch child_ran{1};
    std::atomic<int> child_index{-2};
    auto parent = p.submit([&] {
      p.post([&] {
        child_index = spool::this_worker_index();
        child_ran.count_down();
      });
      child_ran.wait();
      return spool::this_worker_index();
    });
    int parent_index = spool_test::get_elsewhere(parent);
    EXPECT_NE(child_index.load(), parent_index);
    EXPECT_GE(child_index.load(), 0);
  }
  p.wait_idle();
  EXPECT_GE(p.statistics().stolen, static_cast<std::uint64_t>(rounds));
}

// A one-thread pool has nobody to steal from.
TEST(Stats, NoStealsOnOneThread) {
  spool::pool p{pool_config(1)};
  auto f = p.submit([&p] {
    for (int i = 0; i < 100; ++i) p.post([] {});
    return 0;
  });
  EXPECT_EQ(f.get(), 0);
  p.wait_idle();
  EXPECT_EQ(p.statistics().stolen, 0u);
  EXPECT_EQ(p.statistics().completed, 101u);
}
