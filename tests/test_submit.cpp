// submit(), post() and try_post(): results, exceptions, futures, and where tasks run.
#include <gtest/gtest.h>

#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "support.hpp"

using namespace std::chrono_literals;

namespace {

using namespace spool_test;

struct custom_failure {
  int detail;
};

}  // namespace

TEST(Submit, ReturnsTheValue) {
  spool::pool p{pool_config(2)};
  spool::future<int> f = p.submit([](int x) { return x * 2; }, 21);
  EXPECT_EQ(f.get(), 42);
}

TEST(Submit, ArgumentsAreCopiedAtSubmission) {
  spool::pool p{pool_config(2)};
  std::latch release{1};
  std::string text = "before";
  auto f = p.submit(
      [&release](std::string s) {
        release.wait();
        return s;
      },
      text);
  text = "after";
  release.count_down();
  EXPECT_EQ(f.get(), "before");
}

TEST(Submit, ReturnsAReference) {
  static int target = 0;
  spool::pool p{pool_config(2)};
  auto f = p.submit([]() -> int& { return target; });
  int& r = f.get();
  EXPECT_EQ(&r, &target);
}

// A void task's side effects are visible after get() without further synchronisation.
TEST(Submit, VoidTask) {
  spool::pool p{pool_config(2)};
  int written = 0;  // deliberately not atomic: get() must order the write before the read
  spool::future<void> f = p.submit([&written] { written = 7; });
  f.get();
  EXPECT_EQ(written, 7);
}

TEST(Submit, MoveOnlyResult) {
  spool::pool p{pool_config(2)};
  auto f = p.submit([] { return std::make_unique<int>(5); });
  std::unique_ptr<int> r = f.get();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(*r, 5);
}

TEST(Submit, MoveOnlyArgumentAndCallable) {
  spool::pool p{pool_config(2)};
  auto f = p.submit([](std::unique_ptr<int> a) { return *a + 1; }, std::make_unique<int>(41));
  EXPECT_EQ(f.get(), 42);

  auto owned = std::make_unique<int>(9);
  auto g = p.submit([o = std::move(owned)] { return *o; });
  EXPECT_EQ(g.get(), 9);
}

// The callable (and what it captured) is released by the time get() returns.
TEST(Submit, CapturesAreReleasedBeforeGetReturns) {
  spool::pool p{pool_config(2)};
  auto token = std::make_shared<int>(1);
  auto f = p.submit([t = token] { return *t; });
  EXPECT_EQ(f.get(), 1);
  EXPECT_EQ(token.use_count(), 1);
}

TEST(Submit, ExceptionPropagatesThroughGet) {
  spool::pool p{pool_config(2)};
  auto f = p.submit([]() -> int { throw std::runtime_error("boom"); });
  auto g = p.submit([] { throw custom_failure{17}; });
  try {
    (void)f.get();
    ADD_FAILURE() << "get() did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
  EXPECT_FALSE(f.valid());

  try {
    g.get();
    ADD_FAILURE() << "get() did not throw";
  } catch (const custom_failure& e) {
    EXPECT_EQ(e.detail, 17);
  }
}

TEST(Submit, GetLeavesTheFutureEmpty) {
  spool::pool p{pool_config(2)};
  auto f = p.submit([] { return 1; });
  EXPECT_TRUE(f.valid());
  EXPECT_EQ(f.get(), 1);
  EXPECT_FALSE(f.valid());
  EXPECT_FALSE(f.ready());
  EXPECT_EQ(error_code_of([&] { (void)f.get(); }), spool::errc::invalid_argument);
}

// Every waiting call on a future without state throws errc::invalid_argument.
TEST(Submit, EmptyFutureThrowsInvalidArgument) {
  spool::future<int> f;
  EXPECT_FALSE(f.valid());
  EXPECT_FALSE(f.ready());
  EXPECT_EQ(error_code_of([&] { (void)f.get(); }), spool::errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { f.wait(); }), spool::errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { (void)f.wait_for(1ms); }), spool::errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { (void)f.wait_until(std::chrono::steady_clock::now()); }),
            spool::errc::invalid_argument);
  EXPECT_THROW((void)f.get(), spool::error);
}

TEST(Submit, MovingAFutureMovesItsState) {
  spool::pool p{pool_config(2)};
  auto f = p.submit([] { return 3; });
  spool::future<int> g = std::move(f);
  EXPECT_FALSE(f.valid());
  ASSERT_TRUE(g.valid());
  spool::future<int> h;
  h = std::move(g);
  EXPECT_FALSE(g.valid());
  EXPECT_EQ(h.get(), 3);
}

// Destroying a future whose task has not run neither blocks nor stops the task.
TEST(Submit, DroppingAFutureDoesNotBlock) {
  std::latch release{1};
  std::atomic<bool> ran{false};
  spool::pool p{pool_config(1)};
  {
    auto f = p.submit([&] {
      release.wait();
      ran = true;
      return std::string(100, 'x');  // a result nobody takes must still be freed
    });
  }
  release.count_down();
  p.wait_idle();
  EXPECT_TRUE(ran);
}

// wait_for/wait_until report false while the task is held and true once it has finished.
TEST(Submit, TimedWaitsOnAHeldTask) {
  std::latch release{1};
  spool::pool p{pool_config(1)};
  auto f = p.submit([&release] {
    release.wait();
    return 7;
  });
  EXPECT_FALSE(f.wait_for(10ms));
  EXPECT_FALSE(f.wait_until(std::chrono::steady_clock::now() + 10ms));
  EXPECT_FALSE(f.wait_until(std::chrono::system_clock::now() + 10ms));
  EXPECT_FALSE(f.wait_for(0ms));
  EXPECT_FALSE(f.ready());
  release.count_down();
  EXPECT_TRUE(f.wait_for(60s));
  EXPECT_TRUE(f.ready());
  EXPECT_TRUE(f.wait_until(std::chrono::steady_clock::now()));
  EXPECT_TRUE(f.valid());
  EXPECT_EQ(f.get(), 7);
}

TEST(Post, RunsEveryTask) {
  constexpr int n = 100;
  std::latch done{n};
  std::atomic<int> sum{0};
  spool::pool p{pool_config(2)};
  for (int i = 1; i <= n; ++i) {
    p.post([&, i] {
      sum += i;
      done.count_down();
    });
  }
  done.wait();
  EXPECT_EQ(sum, n * (n + 1) / 2);
}

TEST(Post, AcceptsAMoveOnlyCallable) {
  std::latch done{1};
  std::atomic<int> seen{0};
  spool::pool p{pool_config(1)};
  p.post([v = std::make_unique<int>(11), &seen, &done] {
    seen = *v;
    done.count_down();
  });
  done.wait();
  EXPECT_EQ(seen, 11);
}

TEST(TryPost, ReturnsNoErrorAndRuns) {
  std::latch done{1};
  spool::pool p{pool_config(1)};
  std::error_code ec = p.try_post([&done] { done.count_down(); });
  EXPECT_FALSE(ec) << ec.message();
  done.wait();
}

// An exception thrown by a posted task reaches config::on_exception and counts as failed.
TEST(Post, ExceptionReachesOnException) {
  std::mutex mu;
  std::vector<std::string> messages;
  std::vector<std::thread::id> handler_threads;
  std::thread::id task_thread;
  spool::config cfg = pool_config(2);
  cfg.on_exception = [&](std::exception_ptr e) {
    std::lock_guard lock(mu);
    handler_threads.push_back(std::this_thread::get_id());
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      messages.emplace_back(ex.what());
    } catch (...) {
      messages.emplace_back("<not a std::exception>");
    }
  };
  spool::pool p{cfg};
  p.post([&] {
    {
      std::lock_guard lock(mu);
      task_thread = std::this_thread::get_id();
    }
    throw std::runtime_error("posted failure");
  });
  p.post([] {});  // a normal task alongside
  p.wait_idle();
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(messages.size(), 1u);
    EXPECT_EQ(messages[0], "posted failure");
    // "Runs on the worker that ran the task."
    EXPECT_EQ(handler_threads[0], task_thread);
  }
  spool::stats s = p.statistics();
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.completed, 1u);
}

// With no handler configured, the exception is reported on stderr and still counted.
TEST(Post, DefaultHandlerReportsAndCounts) {
  spool::pool p{pool_config(1)};
  testing::internal::CaptureStderr();
  p.post([] { throw std::runtime_error("unhandled-in-post"); });
  p.post([] { throw 5; });  // not a std::exception: must not crash the reporter
  p.wait_idle();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("unhandled-in-post"), std::string::npos) << "stderr was: " << err;
  EXPECT_EQ(p.statistics().failed, 2u);
}

int answer() { return 42; }
struct member_call {
  int value = 3;
  int get() const { return value; }
};

// A null function never reaches a worker: invalid_argument, and nothing is counted.
TEST(Submit, NullFunctionIsAnInvalidArgument) {
  spool::pool p{pool_config(1)};
  using spool::errc;
  using spool_test::error_code_of;
  EXPECT_EQ(error_code_of([&] { (void)p.submit(static_cast<int (*)()>(nullptr)); }),
            errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] {
              (void)p.submit(static_cast<int (member_call::*)() const>(nullptr), member_call{});
            }),
            errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { p.post(std::function<void()>()); }), errc::invalid_argument);
  EXPECT_EQ(p.try_post(static_cast<void (*)()>(nullptr)), errc::invalid_argument);
  EXPECT_EQ(p.try_post_n(4, static_cast<void (*)(std::size_t)>(nullptr)).error,
            errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { (void)p.submit_after(1ms, static_cast<int (*)()>(nullptr)); }),
            errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { (void)p.post_after(1ms, static_cast<void (*)()>(nullptr)); }),
            errc::invalid_argument);
  auto f = p.submit(answer);
  EXPECT_EQ(error_code_of([&] { (void)std::move(f).then(static_cast<int (*)(int)>(nullptr)); }),
            errc::invalid_argument);
  EXPECT_EQ(f.get(), 42);  // the refused then() left the future as it was
  EXPECT_EQ(p.submit(answer).get(), 42);
  EXPECT_EQ(p.submit(&member_call::get, member_call{}).get(), 3);
  p.wait_idle();
  EXPECT_EQ(p.statistics().submitted, 3u);
  EXPECT_EQ(p.statistics().failed, 0u);
}

TEST(Submit, ThrowingTaskCountsAsFailed) {
  spool::pool p{pool_config(1)};
  auto f = p.submit([] { throw std::logic_error("x"); });
  EXPECT_THROW(f.get(), std::logic_error);
  p.wait_idle();
  EXPECT_EQ(p.statistics().failed, 1u);
  EXPECT_EQ(p.statistics().completed, 0u);
}

TEST(WorkerIndex, IsMinusOneOutsideAPool) {
  EXPECT_EQ(spool::this_worker_index(), -1);
  std::thread t([] { EXPECT_EQ(spool::this_worker_index(), -1); });
  t.join();
}

// Two tasks held together must be on two different workers: their indices are exactly {0, 1}.
TEST(WorkerIndex, IsInRangeAndDistinctInside) {
  std::latch both{2};
  spool::pool p{pool_config(2)};
  auto index = [&both] {
    both.arrive_and_wait();
    return spool::this_worker_index();
  };
  auto a = p.submit(index);
  auto b = p.submit(index);
  int ia = get_elsewhere(a);
  int ib = get_elsewhere(b);
  EXPECT_GE(ia, 0);
  EXPECT_LT(ia, 2);
  EXPECT_GE(ib, 0);
  EXPECT_LT(ib, 2);
  EXPECT_NE(ia, ib);

  spool::pool four{pool_config(4)};
  for (int i = 0; i < 50; ++i) {
    int k = get_elsewhere(four.submit([] { return spool::this_worker_index(); }));
    EXPECT_GE(k, 0);
    EXPECT_LT(k, 4);
  }
}

TEST(IsWorker, TrueOnlyOnThatPoolsWorkers) {
  spool::pool a{pool_config(2)};
  spool::pool b{pool_config(1)};
  EXPECT_FALSE(a.is_worker());
  EXPECT_TRUE(get_elsewhere(a.submit([&a] { return a.is_worker(); })));
  EXPECT_FALSE(get_elsewhere(b.submit([&a] { return a.is_worker(); })));
  EXPECT_TRUE(get_elsewhere(b.submit([&b] { return b.is_worker(); })));
  // On another pool's worker the index is that pool's.
  EXPECT_EQ(get_elsewhere(b.submit([] { return spool::this_worker_index(); })), 0);
}

TEST(ThreadCount, MatchesTheConfig) {
  spool::pool three{pool_config(3)};
  EXPECT_EQ(three.thread_count(), 3u);
  // threads = 0 means one per CPU.
  spool::pool dflt{pool_config(0)};
  EXPECT_EQ(dflt.thread_count(), std::max(1u, std::thread::hardware_concurrency()));
}
