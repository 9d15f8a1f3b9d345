// Where work resumes: then(pool, f), then(priority, f), then_inline(f); co_await resuming on
// the awaiting coroutine's pool; spool::this_pool() (and spool_this_pool in C) inside a task.
#include <spool/spool.h>
#include <spool/coro.hpp>
#include <spool/spool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using spool_test::gate;
using spool_test::get_elsewhere;
using spool_test::hold_workers;
using spool_test::pool_config;

TEST(ThenWhere, OnAnotherPool) {
  spool::pool a(pool_config(1));
  spool::pool b(pool_config(1));
  auto f = a.submit([] { return 1; }).then(b, [&b](int x) {
    EXPECT_EQ(spool::this_pool(), &b);
    return x + 1;
  });
  // The result belongs to b: its own continuations run there too.
  auto g = std::move(f).then([&b](int x) { return spool::this_pool() == &b ? x : -1; });
  EXPECT_EQ(get_elsewhere(g), 2);
  spool::shared_future<int> s = a.submit([] { return 5; }).share();
  EXPECT_EQ(get_elsewhere(s.then(b, [&b](const int& x) { return b.is_worker() ? x : -1; })), 5);
}

// A high-priority continuation runs before normal work queued ahead of it.
TEST(ThenWhere, AtAPriority) {
  spool::pool p(pool_config(1));
  std::latch started(1);
  gate release;
  hold_workers(p, started, release);
  std::mutex mu;
  std::vector<int> order;
  auto record = [&](int i) {
    std::lock_guard lock(mu);
    order.push_back(i);
  };
  spool::promise<int> pr(p);
  auto normal = p.submit([&] { record(1); });
  auto urgent = pr.get_future().then(spool::priority::high, [&](int) { record(2); });
  pr.set_value(0);  // the continuation is queued at high priority behind the held worker
  release.open();
  get_elsewhere(normal);  // not here: this thread would take its own task back and run it
  get_elsewhere(urgent);
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
}

TEST(ThenWhere, InlineOnTheCompletingThread) {
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  std::thread::id ran_on;
  auto f = pr.get_future().then_inline([&](int x) {
    ran_on = std::this_thread::get_id();
    return x * 2;
  });
  pr.set_value(4);
  EXPECT_TRUE(f.ready());  // ran inside set_value
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(f.get(), 8);
  // On a ready future it runs at once, on the calling thread; from a worker's completion, on
  // that worker.
  auto g = p.submit([] { return 1; });
  g.wait();
  int seen = 0;
  (void)std::move(g).then_inline([&](int x) { seen = x; });
  EXPECT_EQ(seen, 1);
  // The task waits for the gate, so the continuation is attached before it completes.
  gate attached;
  auto h = p.submit([&attached] {
              attached.wait();
              return 2;
            }).then_inline([&p](int x) { return p.is_worker() ? x : -1; });
  attached.open();
  EXPECT_EQ(get_elsewhere(h), 2);
}

// A worker's completion makes the state ready before it takes the continuations: a thread
// that has seen the future ready must still run then_inline's function itself, however close
// behind the completion it attaches.
TEST(ThenWhere, InlineOnAFutureSeenReadyRunsOnTheCaller) {
  spool::pool p(pool_config(1));
  const std::thread::id here = std::this_thread::get_id();
  int elsewhere = 0;
  for (int i = 0; i < 20000; ++i) {
    auto g = p.submit([i] { return i; });
    while (!g.ready()) {
    }
    std::thread::id ran_on;
    auto h = std::move(g).then_inline([&ran_on](int x) {
      ran_on = std::this_thread::get_id();
      return x;
    });
    EXPECT_EQ(h.get(), i);
    if (ran_on != here) ++elsewhere;
  }
  EXPECT_EQ(elsewhere, 0);
}

spool::task<bool> await_elsewhere(spool::pool& mine, spool::future<int> theirs) {
  co_await std::move(theirs);
  co_return mine.is_worker() && spool::this_pool() == &mine;
}

// co_await resumes on the awaiting coroutine's pool, not on the awaited future's.
TEST(CoAwaitWhere, ResumesOnTheAwaitingCoroutinesPool) {
  spool::pool mine(pool_config(1));
  spool::pool theirs(pool_config(1));
  std::latch running(1);
  gate release;
  auto slow = theirs.submit([&] {
    running.count_down();
    release.wait();
    return 1;
  });
  running.wait();
  auto done = spool::start(mine, await_elsewhere(mine, std::move(slow)));
  mine.wait_idle();  // suspended on slow
  release.open();
  EXPECT_TRUE(done.get());
}

void record_c_pool(void* arg) { *static_cast<spool_pool**>(arg) = spool_this_pool(); }

TEST(ThisPool, InsideTasksOnlyAndForEveryKindOfPool) {
  EXPECT_EQ(spool::this_pool(), nullptr);
  EXPECT_EQ(spool_this_pool(), nullptr);
  spool::pool p(pool_config(1));
  EXPECT_EQ(get_elsewhere(p.submit([] { return spool::this_pool(); })), &p);
  // A task its outside waiter takes back and runs on its own thread is still p's task.
  EXPECT_EQ(p.submit([] { return spool::this_pool(); }).get(), &p);
  // caller_runs: the submitting thread runs the task, which is p's.
  spool::pool bounded(pool_config(1, 1, spool::full_policy::caller_runs));
  std::latch started(1);
  gate release;
  hold_workers(bounded, started, release);
  bounded.post([] {});  // fills the queue
  spool::pool* seen = nullptr;
  bounded.post([&seen] { seen = spool::this_pool(); });  // runs here
  EXPECT_EQ(seen, &bounded);
  EXPECT_EQ(spool::this_pool(), nullptr);
  release.open();
  // The default pool, and a C pool: their C++ faces.
  EXPECT_EQ(get_elsewhere(spool::default_pool().submit([] { return spool::this_pool(); })),
            &spool::default_pool());
  spool_pool* c = nullptr;
  ASSERT_EQ(spool_create(nullptr, &c), SPOOL_OK);
  spool_pool* seen_c = nullptr;
  ASSERT_EQ(spool_submit(c, record_c_pool, &seen_c), SPOOL_OK);
  ASSERT_EQ(spool_wait_idle(c), SPOOL_OK);
  EXPECT_EQ(seen_c, c);
  ASSERT_EQ(spool_destroy(c), SPOOL_OK);
  // A C++ pool's task has no C face.
  EXPECT_EQ(get_elsewhere(p.submit([] { return spool_this_pool(); })), nullptr);
}

}  // namespace
