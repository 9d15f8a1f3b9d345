// Futures, promises and coroutines that outlive their pool (src/lifetime/README.md): what they
// hold stays valid, and a continuation that the pool can no longer take runs on the thread
// that completes or attaches it, exactly as one the pool refuses. AddressSanitizer checks
// that nothing reads the destroyed pool (its memory is poisoned while unused).
#include <spool/coro.hpp>
#include <spool/spool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <optional>
#include <thread>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using spool_test::pool_config;

TEST(FutureLifetime, ThenOnAReadyFutureAfterItsPoolIsDestroyedRunsHere) {
  spool::future<int> f;
  {
    spool::pool p(pool_config(1));
    f = p.submit([] { return 20; });
    f.wait();
  }
  const std::thread::id here = std::this_thread::get_id();
  std::thread::id ran_on;
  auto g = std::move(f).then([&](int x) {
    ran_on = std::this_thread::get_id();
    return x + 1;
  });
  ASSERT_TRUE(g.ready());
  EXPECT_EQ(ran_on, here);
  EXPECT_EQ(g.get(), 21);
}

// The next pool is likely made in the destroyed one's memory: a future of the old pool must
// not take it for its own.
TEST(FutureLifetime, AContinuationNeverGoesToTheNextPoolInTheSameMemory) {
  spool::future<int> f;
  {
    spool::pool p(pool_config(1));
    f = p.submit([] { return 1; });
    f.wait();
  }
  spool::pool next(pool_config(1));
  std::atomic<int> ran_on_worker{-2};
  auto g = std::move(f).then([&](int x) {
    ran_on_worker = spool::this_worker_index();
    return x;
  });
  EXPECT_EQ(g.get(), 1);
  EXPECT_EQ(ran_on_worker.load(), -1);
  EXPECT_EQ(next.statistics().submitted, 0u);
}

TEST(FutureLifetime, PromiseCompletedAfterItsPoolIsDestroyed) {
  spool::promise<int> pr = [] {
    spool::pool p(pool_config(1));
    return spool::promise<int>(p);
  }();
  auto f = pr.get_future().then([](int x) { return x * 2; });
  pr.set_value(21);
  ASSERT_TRUE(f.ready());
  EXPECT_EQ(f.get(), 42);
}

TEST(FutureLifetime, WaitOnAPromiseFutureAfterItsPoolIsDestroyed) {
  std::optional<spool::promise<int>> pr;
  {
    spool::pool p(pool_config(1));
    pr.emplace(p);
  }
  spool::shared_future<int> f = pr->get_future().share();
  std::latch waiting(1);
  int seen = 0;
  std::thread waiter([&] {
    waiting.count_down();
    seen = f.get();  // sleeps on the state itself; the pool is not touched
  });
  waiting.wait();
  EXPECT_FALSE(f.wait_for(std::chrono::milliseconds(1)));
  pr->set_value(7);
  waiter.join();
  EXPECT_EQ(seen, 7);
}

TEST(FutureLifetime, WhenAllAndCancelAfterThePoolIsDestroyed) {
  spool::future<int> a;
  spool::future<int> b;
  std::optional<spool::promise<int>> pr;
  {
    spool::pool p(pool_config(1));
    a = p.submit([] { return 1; });
    b = p.submit([] { return 2; });
    pr.emplace(p);
    a.wait();
    b.wait();
  }
  auto sum = spool::when_all(std::move(a), std::move(b)).then([](std::tuple<int, int> v) {
    return std::get<0>(v) + std::get<1>(v);
  });
  EXPECT_EQ(sum.get(), 3);
  auto pending = pr->get_future();
  EXPECT_TRUE(pending.cancel());
  EXPECT_THROW(pending.get(), spool::task_cancelled);
}

spool::task<int> await_promise(spool::future<int> f) { co_return co_await std::move(f) + 1; }

// A coroutine suspended on a promise does not hold up its pool's destruction (it is not a
// task), and is resumed, on the completing thread, once the promise is set.
TEST(FutureLifetime, CoroutineAwaitingAPromiseWhenItsPoolIsDestroyed) {
  std::optional<spool::promise<int>> pr;
  spool::future<int> done;
  {
    spool::pool p(pool_config(1));
    pr.emplace(p);
    done = spool::start(p, await_promise(pr->get_future()));
  }  // the drain runs the coroutine up to its co_await
  EXPECT_FALSE(done.ready());
  pr->set_value(41);
  ASSERT_TRUE(done.ready());
  EXPECT_EQ(done.get(), 42);
}

// The same after a promise destroyed unset: the coroutine sees task_cancelled.
TEST(FutureLifetime, CoroutineAwaitingAPromiseDestroyedAfterThePool) {
  std::optional<spool::promise<int>> pr;
  spool::future<int> done;
  {
    spool::pool p(pool_config(1));
    pr.emplace(p);
    done = spool::start(p, await_promise(pr->get_future()));
  }
  pr.reset();
  EXPECT_THROW(done.get(), spool::task_cancelled);
}

// Attaching continuations races with the pool's destruction: each continuation runs once,
// on the pool or on the attaching thread, and nothing reads the pool after it is gone.
TEST(FutureLifetimeStress, ThenRacesThePoolsDestruction) {
  const int rounds = stress_iterations(300);
  for (int i = 0; i < rounds; ++i) {
    auto p = std::make_unique<spool::pool>(pool_config(1));
    std::vector<spool::future<int>> sources;
    for (int k = 0; k < 8; ++k) sources.push_back(p->submit([k] { return k; }));
    for (auto& s : sources) s.wait();
    std::latch go(2);
    std::vector<spool::future<int>> results;
    std::thread attacher([&] {
      go.arrive_and_wait();
      for (auto& s : sources) results.push_back(std::move(s).then([](int x) { return x + 1; }));
    });
    go.arrive_and_wait();
    p.reset();
    attacher.join();
    int sum = 0;
    for (auto& r : results) sum += r.get();
    ASSERT_EQ(sum, 36);
  }
}

}  // namespace
