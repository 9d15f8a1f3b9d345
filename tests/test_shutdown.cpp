// The pool's lifecycle: wait_idle(), close(), shutdown(drain | discard), the destructor, and
// the errors for submitting afterwards or blocking from inside a task.
#include <gtest/gtest.h>

#include <spool/spool.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <latch>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace spool_test;

TEST(WaitIdle, ReturnsAtOnceOnAnIdlePool) {
  spool::pool p{pool_config(2)};
  p.wait_idle();
  p.wait_idle();
  SUCCEED();
}

// wait_idle() covers queued and running tasks, and the pool stays usable afterwards.
TEST(WaitIdle, WaitsForQueuedAndRunningTasks) {
  std::latch started{2}, release{1};
  std::atomic<bool> released{false}, returned_before_release{false};
  std::atomic<int> ran{0};
  spool::pool p{pool_config(2)};
  hold_workers(p, started, release);
  for (int i = 0; i < 100; ++i) p.post([&] { ++ran; });

  std::thread waiter([&] {
    p.wait_idle();
    returned_before_release = !released.load();
    EXPECT_EQ(ran.load(), 100);
  });
  released = true;
  release.count_down();
  waiter.join();
  EXPECT_FALSE(returned_before_release);

  // Usable afterwards, repeatedly.
  for (int round = 1; round <= 3; ++round) {
    for (int i = 0; i < 100; ++i) p.post([&] { ++ran; });
    p.wait_idle();
    EXPECT_EQ(ran, 100 + 100 * round);
  }
}

// Tasks that running tasks submit count too: wait_idle() returns only after the whole tree ran.
TEST(WaitIdle, WaitsForTasksSubmittedByTasks) {
  std::atomic<int> ran{0};
  spool::pool p{pool_config(2)};
  for (int i = 0; i < 10; ++i) {
    p.post([&] {
      for (int j = 0; j < 10; ++j) {
        p.post([&] {
          for (int k = 0; k < 10; ++k) p.post([&] { ++ran; });
          ++ran;
        });
      }
      ++ran;
    });
  }
  p.wait_idle();
  EXPECT_EQ(ran, 10 + 100 + 1000);
}

// shutdown(drain) runs everything that was queued when it was called, then joins.
TEST(ShutdownDrain, RunsEverythingQueued) {
  constexpr int queued = 200;
  std::latch started{1}, release{1};
  std::atomic<int> ran{0};
  spool::pool p{pool_config(1)};
  hold_workers(p, started, release);
  std::vector<spool::future<int>> futures;
  for (int i = 0; i < queued; ++i) {
    futures.push_back(p.submit([&ran, i] {
      ++ran;
      return i;
    }));
  }
  std::size_t dropped = 99;
  std::thread stopper([&] { dropped = p.shutdown(spool::shutdown_mode::drain); });
  // Refusals start as soon as shutdown() begins; once we see one, the queue is still full.
  while (!p.try_post([] {})) {
    // accepted before the shutdown started: a no-op that drains with the rest
  }
  release.count_down();
  stopper.join();
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(ran, queued);
  for (int i = 0; i < queued; ++i) EXPECT_EQ(futures[i].get(), i);
  EXPECT_EQ(p.statistics().cancelled, 0u);
  EXPECT_EQ(p.statistics().threads_live, 0u);
}

// Tasks submitted by running tasks while the pool drains are accepted and run.
TEST(ShutdownDrain, RunsTasksSubmittedDuringTheDrain) {
  std::latch started{1}, release{1};
  std::atomic<int> ran{0};
  std::atomic<int> refused_inside{0};
  spool::pool p{pool_config(1)};
  hold_workers(p, started, release);
  auto leaf = [&] { ++ran; };
  auto middle = [&] {
    if (p.try_post(leaf)) ++refused_inside;
    ++ran;
  };
  for (int i = 0; i < 10; ++i) {
    p.post([&] {
      for (int j = 0; j < 10; ++j) {
        if (p.try_post(middle)) ++refused_inside;
      }
      ++ran;
    });
  }
  std::thread stopper([&] { EXPECT_EQ(p.shutdown(spool::shutdown_mode::drain), 0u); });
  while (!p.try_post([] {})) {
    // spin until shutdown() has started refusing outside submissions
  }
  release.count_down();  // the tree below the ten queued tasks grows only now
  stopper.join();
  EXPECT_EQ(refused_inside, 0);
  EXPECT_EQ(ran, 10 + 100 + 100);
}

// The same after close(): queued tasks run, and so do the tasks they submit.
TEST(Close, QueuedTasksAndTheirChildrenStillRun) {
  std::latch started{1}, release{1};
  std::atomic<int> ran{0};
  std::atomic<bool> refused_ran{false};
  spool::pool p{pool_config(1)};
  hold_workers(p, started, release);
  for (int i = 0; i < 10; ++i) {
    p.post([&] {
      for (int j = 0; j < 10; ++j) p.post([&] { ++ran; });
      ++ran;
    });
  }
  p.close();
  EXPECT_EQ(p.try_post([&] { refused_ran = true; }), spool::errc::shut_down);
  release.count_down();
  EXPECT_EQ(p.shutdown(), 0u);
  EXPECT_EQ(ran, 110);
  EXPECT_FALSE(refused_ran);
}

// shutdown(discard) drops every queued task (not the running ones) without waiting for the
// running ones, returns how many, and the dropped futures throw task_cancelled. The held workers
// are released only once every queued future has reported its cancellation, so the count is
// exact.
TEST(ShutdownDiscard, DropsQueuedTasksAndReportsThem) {
  constexpr int queued = 50;
  std::latch started{2}, release{1};
  std::atomic<int> queued_ran{0};
  auto token = std::make_shared<int>(0);
  spool::pool p{pool_config(2)};
  auto holder = p.submit([&] {
    started.count_down();
    release.wait();
    return 5;
  });
  p.post([&] {
    started.count_down();
    release.wait();
  });
  started.wait();

  std::vector<spool::future<int>> futures;
  for (int i = 0; i < queued; ++i) {
    futures.push_back(p.submit([&queued_ran, token] { return ++queued_ran; }));
  }
  for (int i = 0; i < queued; ++i) p.post([&queued_ran, token] { ++queued_ran; });
  EXPECT_EQ(p.statistics().queued, 2u * queued);

  std::size_t dropped = 0;
  std::thread stopper([&] { dropped = p.shutdown(spool::shutdown_mode::discard); });
  // Dropping must not wait for the running tasks: every queued future reports cancellation
  // while both workers are still held. (The deadline only turns a hang into a failure.)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int reported_while_held = 0;
  for (auto& f : futures) reported_while_held += f.wait_until(deadline) ? 1 : 0;
  EXPECT_EQ(reported_while_held, queued) << "queued tasks were not dropped until a worker was free";
  release.count_down();
  stopper.join();

  EXPECT_EQ(dropped, 2u * queued);
  EXPECT_EQ(queued_ran, 0);
  for (auto& f : futures) {
    try {
      (void)f.get();
      ADD_FAILURE() << "a queued task was not dropped";
    } catch (const spool::task_cancelled& e) {
      EXPECT_EQ(e.code(), spool::errc::cancelled);
    }
  }
  EXPECT_EQ(holder.get(), 5);  // the running task finished normally
  EXPECT_EQ(token.use_count(), 1) << "a dropped callable was kept";
  spool::stats s = p.statistics();
  EXPECT_EQ(s.cancelled, dropped);
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.queued, 0u);
  EXPECT_EQ(s.threads_live, 0u);
}

// After close() or shutdown(), every way to submit from outside is refused with
// errc::shut_down (counted as rejected) and the callable never runs.
TEST(AfterShutdown, SubmissionsAreRefused) {
  for (int how = 0; how < 3; ++how) {
    SCOPED_TRACE(how == 0 ? "close" : how == 1 ? "shutdown(drain)" : "shutdown(discard)");
    std::atomic<bool> ran{false};
    auto token = std::make_shared<int>(0);
    spool::pool p{pool_config(2)};
    if (how == 0) p.close();
    if (how == 1) p.shutdown(spool::shutdown_mode::drain);
    if (how == 2) p.shutdown(spool::shutdown_mode::discard);

    EXPECT_EQ(error_code_of([&] { (void)p.submit([&, token] { ran = true; }); }),
              spool::errc::shut_down);
    EXPECT_EQ(error_code_of([&] { p.post([&, token] { ran = true; }); }), spool::errc::shut_down);
    EXPECT_EQ(p.try_post([&, token] { ran = true; }), spool::errc::shut_down);
    EXPECT_EQ(token.use_count(), 1) << "a refused callable was kept";
    EXPECT_EQ(p.statistics().rejected, 3u);
    EXPECT_EQ(p.statistics().submitted, 0u);
    p.shutdown();
    EXPECT_FALSE(ran);
  }
}

// shutdown() twice (either order of modes), and shutdown() before the destructor, are fine.
TEST(Shutdown, TwiceIsFine) {
  std::atomic<int> ran{0};
  spool::pool p{pool_config(2)};
  for (int i = 0; i < 10; ++i) p.post([&] { ++ran; });
  EXPECT_EQ(p.shutdown(spool::shutdown_mode::drain), 0u);
  EXPECT_EQ(ran, 10);
  EXPECT_EQ(p.shutdown(spool::shutdown_mode::discard), 0u);
  EXPECT_EQ(p.shutdown(spool::shutdown_mode::drain), 0u);
  p.close();
  p.wait_idle();  // nothing left to wait for
}

// Blocking calls made from one of the pool's own workers throw errc::would_deadlock instead of
// waiting for themselves; the pool keeps working.
TEST(FromInsideATask, BlockingCallsThrowWouldDeadlock) {
  spool::pool p{pool_config(2)};
  auto shutdown_code = p.submit([&p] { return error_code_of([&p] { p.shutdown(); }); });
  auto discard_code =
      p.submit([&p] { return error_code_of([&p] { p.shutdown(spool::shutdown_mode::discard); }); });
  auto wait_code = p.submit([&p] { return error_code_of([&p] { p.wait_idle(); }); });
  EXPECT_EQ(shutdown_code.get(), spool::errc::would_deadlock);
  EXPECT_EQ(discard_code.get(), spool::errc::would_deadlock);
  EXPECT_EQ(wait_code.get(), spool::errc::would_deadlock);
  EXPECT_EQ(p.submit([] { return 1; }).get(), 1);
}

// A blocking call on ANOTHER pool from a worker is not a self-deadlock and is allowed.
TEST(FromInsideATask, WaitingOnAnotherPoolIsAllowed) {
  spool::pool outer{pool_config(1)};
  spool::pool inner{pool_config(1)};
  std::atomic<int> ran{0};
  auto f = outer.submit([&] {
    for (int i = 0; i < 10; ++i) inner.post([&] { ++ran; });
    inner.wait_idle();
    return ran.load();
  });
  EXPECT_EQ(f.get(), 10);
}

// The destructor drains: every task queued before destruction runs, including those they spawn.
TEST(Destructor, Drains) {
  constexpr int queued = 500;
  std::latch started{1}, release{1};
  std::atomic<int> ran{0};
  std::thread releaser;
  {
    spool::pool p{pool_config(1)};
    hold_workers(p, started, release);
    for (int i = 0; i < queued; ++i) {
      p.post([&] {
        p.post([&] { ++ran; });
        ++ran;
      });
    }
    releaser = std::thread([&] { release.count_down(); });
  }  // ~pool
  releaser.join();
  EXPECT_EQ(ran, 2 * queued);
}

// Destroying the pool from one of its own tasks would wait for itself: it terminates instead.
TEST(DestructorDeathTest, FromInsideATaskTerminates) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto* p = new spool::pool(pool_config(1));
        p->submit([p] { delete p; }).wait();
      },
      "");
}
