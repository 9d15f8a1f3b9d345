// Cancellation that propagates: submit and post with a std::stop_token, tasks that receive one
// (theirs, the pool's, a task_group's), cancel() passed up a then() chain and into when_all's
// and when_any's inputs, and coroutines whose awaits a stop ends. A stop never interrupts
// running work: it cancels what has not started and tells what runs.
#include <spool/coro.hpp>
#include <spool/spool.hpp>
#include <spool/task_group.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using spool_test::gate;
using spool_test::hold_workers;
using spool_test::pool_config;
using spool_test::release_counter;

TEST(StopToken, StopBeforeTheStartCancelsTheTaskAtOnce) {
  spool::pool p(pool_config(1));
  std::latch started(1);
  gate release;
  hold_workers(p, started, release);
  std::stop_source source;
  std::atomic<int> released{0};
  std::atomic<bool> ran{false};
  auto f = p.submit(source.get_token(), [&ran, c = release_counter(released)] {
    ran = true;
    return 1;
  });
  EXPECT_FALSE(f.ready());
  EXPECT_TRUE(source.request_stop());
  ASSERT_TRUE(f.ready());  // before any worker met it
  EXPECT_EQ(released.load(), 1);
  EXPECT_THROW(f.get(), spool::task_cancelled);
  release.open();
  p.wait_idle();
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(p.statistics().cancelled, 1u);
}

TEST(StopToken, TokenStoppedAlreadyAndRunningTaskSeesTheStop) {
  spool::pool p(pool_config(2));
  std::stop_source stopped;
  stopped.request_stop();
  auto never = p.submit(stopped.get_token(), [] { return 1; });
  EXPECT_THROW(never.get(), spool::task_cancelled);

  std::stop_source source;
  std::latch running(1);
  auto f = p.submit(
      source.get_token(),
      [&running](std::stop_token st, int base) {
        running.count_down();
        int polls = 0;
        while (!st.stop_requested()) {
          ++polls;
          std::this_thread::yield();
        }
        return base + (polls >= 0 ? 1 : 0);
      },
      41);
  running.wait();
  source.request_stop();  // started: not cancelled, told
  EXPECT_EQ(spool_test::get_elsewhere(f), 42);
}

// A task that takes a token and was given none gets the pool's: stopped when shutdown begins,
// so a loop that polls it lets the drain finish.
TEST(StopToken, TasksGetThePoolsTokenStoppedByShutdown) {
  spool::pool p(pool_config(1));
  std::latch running(1);
  auto f = p.submit([&running](std::stop_token st) {
    running.count_down();
    while (!st.stop_requested()) std::this_thread::yield();
    return st.stop_possible();
  });
  running.wait();
  EXPECT_FALSE(p.get_stop_token().stop_requested());
  p.shutdown();
  EXPECT_TRUE(p.get_stop_token().stop_requested());
  EXPECT_TRUE(f.get());
}

TEST(StopToken, PostIsSkippedWhenStoppedAndGetsItsToken) {
  spool::pool p(pool_config(1));
  std::latch started(1);
  gate release;
  hold_workers(p, started, release);
  std::stop_source source;
  std::atomic<int> runs{0};
  std::atomic<int> released{0};
  p.post(source.get_token(), [&runs, c = release_counter(released)] { ++runs; });
  std::atomic<bool> token_possible{false};
  std::stop_source other;
  p.post(other.get_token(),
         [&](std::stop_token st) { token_possible = st.stop_possible() && !st.stop_requested(); });
  source.request_stop();
  release.open();
  p.wait_idle();
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(released.load(), 1);
  EXPECT_TRUE(token_possible.load());
  EXPECT_EQ(p.statistics().cancelled, 1u);
  std::stop_source none;
  EXPECT_EQ(p.try_post(none.get_token(), static_cast<void (*)()>(nullptr)),
            spool::errc::invalid_argument);
}

// cancel() on the end of a chain cancels every link that has not started, up to the task.
TEST(CancelPropagation, ThenChainUpToItsTask) {
  spool::pool p(pool_config(1));
  std::latch started(1);
  gate release;
  hold_workers(p, started, release);
  std::atomic<int> released{0};
  auto source = p.submit([c = release_counter(released)] { return 1; });
  auto end = std::move(source)
                 .then([c = release_counter(released)](int x) { return x + 1; })
                 .then([c = release_counter(released)](int x) { return x + 1; });
  EXPECT_TRUE(end.cancel());
  EXPECT_EQ(released.load(), 3);  // the task's callable and both continuations'
  EXPECT_THROW(end.get(), spool::task_cancelled);
  release.open();
  p.wait_idle();
  EXPECT_EQ(p.statistics().completed, 1u);  // only the held task ran
}

// A link that has started is not cancelled; those after it are.
TEST(CancelPropagation, StopsAtARunningLink) {
  spool::pool p(pool_config(2));
  std::latch running(1);
  gate release;
  std::atomic<bool> second_ran{false};
  auto first = p.submit([&] {
    running.count_down();
    release.wait();
    return 1;
  });
  auto end = std::move(first).then([&](int x) {
    second_ran = true;
    return x;
  });
  running.wait();
  EXPECT_TRUE(end.cancel());
  release.open();
  EXPECT_THROW(end.get(), spool::task_cancelled);
  p.wait_idle();
  EXPECT_FALSE(second_ran.load());
}

// A shared source has other readers: cancelling one continuation leaves it alone.
TEST(CancelPropagation, SharedSourceIsNotCancelled) {
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  spool::shared_future<int> shared = pr.get_future().share();
  auto a = shared.then([](const int& x) { return x + 1; });
  auto b = shared.then([](const int& x) { return x + 2; });
  EXPECT_TRUE(a.cancel());
  EXPECT_FALSE(pr.cancelled());
  pr.set_value(1);
  EXPECT_EQ(b.get(), 3);
  EXPECT_EQ(shared.get(), 1);
  EXPECT_THROW(a.get(), spool::task_cancelled);
}

TEST(CancelPropagation, WhenAllAndWhenAnyCancelTheirInputs) {
  spool::pool p(pool_config(1));
  std::latch started(1);
  gate release;
  hold_workers(p, started, release);
  std::atomic<int> released{0};
  auto all = spool::when_all(p.submit([c = release_counter(released)] { return 1; }),
                             p.submit([c = release_counter(released)] {}));
  EXPECT_TRUE(all.cancel());
  EXPECT_EQ(released.load(), 2);
  EXPECT_THROW(all.get(), spool::task_cancelled);

  std::vector<spool::future<int>> inputs;
  for (int i = 0; i < 3; ++i)
    inputs.push_back(p.submit([c = release_counter(released)] { return 0; }));
  auto any = spool::when_any(std::move(inputs));
  EXPECT_TRUE(any.cancel());
  EXPECT_EQ(released.load(), 5);
  EXPECT_THROW(any.get(), spool::task_cancelled);
  release.open();
  p.wait_idle();
  EXPECT_EQ(p.statistics().cancelled, 5u);
}

// ---- coroutines ----

spool::task<int> await_it(spool::future<int> f) { co_return co_await std::move(f); }

// Suspended on a promise: the stop cancels the promise's future (the producer learns it) and
// the coroutine resumes with task_cancelled. (wait_idle: the coroutine has run up to its
// co_await and suspended, as a suspended coroutine holds no task.)
TEST(CoroutineStop, StopEndsAWaitOnAPromise) {
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  std::stop_source source;
  auto done = spool::start(p, await_it(pr.get_future()), source.get_token());
  p.wait_idle();
  EXPECT_FALSE(done.ready());
  source.request_stop();
  EXPECT_THROW(done.get(), spool::task_cancelled);
  EXPECT_TRUE(pr.cancelled());
}

// Suspended on a task that is running (on another pool): the task goes on; the coroutine
// resumes interrupted, on its own pool.
TEST(CoroutineStop, StopEndsAWaitOnARunningTask) {
  spool::pool p(pool_config(1));
  spool::pool other(pool_config(1));
  std::latch running(1);
  gate release;
  std::atomic<bool> finished{false};
  auto work = other.submit([&] {
    running.count_down();
    release.wait();
    finished = true;
    return 5;
  });
  running.wait();
  std::stop_source source;
  auto done = spool::start(p, await_it(std::move(work)), source.get_token());
  p.wait_idle();
  source.request_stop();
  EXPECT_THROW(done.get(), spool::task_cancelled);
  p.wait_idle();
  EXPECT_EQ(p.statistics().completed, 2u);  // the coroutine's start and its resumption
  release.open();
  other.wait_idle();
  EXPECT_TRUE(finished.load());
}

spool::task<int> await_shared(spool::shared_future<int> f) { co_return co_await f; }

// A stop ends the wait on a shared_future without cancelling it: other readers may want it.
TEST(CoroutineStop, AWaitOnASharedFutureEndsButTheFutureStands) {
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  spool::shared_future<int> shared = pr.get_future().share();
  std::stop_source source;
  auto done = spool::start(p, await_shared(shared), source.get_token());
  p.wait_idle();
  source.request_stop();
  EXPECT_THROW(done.get(), spool::task_cancelled);
  EXPECT_FALSE(pr.cancelled());
  pr.set_value(3);
  EXPECT_EQ(shared.get(), 3);
}

spool::task<int> catch_and_go_on(spool::future<int> first, spool::future<int> second) {
  int caught = 0;
  try {
    co_await std::move(first);
  } catch (const spool::task_cancelled&) {
    caught = 1;
  }
  try {
    co_await std::move(second);  // the stop was requested: throws at once
  } catch (const spool::task_cancelled&) {
    caught += 10;
  }
  co_return caught;
}

TEST(CoroutineStop, LaterAwaitsThrowAtOnceAndTheCoroutineMayCatch) {
  spool::pool p(pool_config(1));
  spool::promise<int> a(p);
  spool::promise<int> b(p);
  std::stop_source source;
  auto done = spool::start(p, catch_and_go_on(a.get_future(), b.get_future()), source.get_token());
  p.wait_idle();
  source.request_stop();
  EXPECT_EQ(done.get(), 11);
}

spool::task<int> nested(spool::future<int> f) { co_return co_await await_it(std::move(f)) + 1; }

TEST(CoroutineStop, NestedTasksShareTheToken) {
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  std::stop_source source;
  auto done = spool::start(p, nested(pr.get_future()), source.get_token());
  p.wait_idle();
  source.request_stop();
  EXPECT_THROW(done.get(), spool::task_cancelled);
}

TEST(CoroutineStop, StoppedBeforeItStartsItNeverRuns) {
  spool::pool p(pool_config(1));
  std::stop_source source;
  source.request_stop();
  std::atomic<bool> ran{false};
  auto body = [](std::atomic<bool>& r) -> spool::task<int> {
    r = true;
    co_return 1;
  };
  auto done = spool::start(p, body(ran), source.get_token());
  EXPECT_THROW(done.get(), spool::task_cancelled);
  EXPECT_FALSE(ran.load());
}

// Given the pool's token, a coroutine suspended on a promise that is never set is resumed by
// the pool's shutdown, with task_cancelled: its future becomes ready when the pool goes.
TEST(CoroutineStop, PoolShutdownCancelsACoroutineOnANeverSetPromise) {
  std::optional<spool::promise<int>> pr;
  spool::future<int> done;
  {
    spool::pool p(pool_config(1));
    pr.emplace(p);
    done = spool::start(p, await_it(pr->get_future()), p.get_stop_token());
    p.wait_idle();
  }
  ASSERT_TRUE(done.ready());
  EXPECT_THROW(done.get(), spool::task_cancelled);
  EXPECT_TRUE(pr->cancelled());
}

TEST(CoroutineStop, ScheduleAfterTheStopThrows) {
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  std::stop_source source;
  auto body = [](spool::pool& pool, spool::future<int> f) -> spool::task<int> {
    try {
      co_await std::move(f);
    } catch (const spool::task_cancelled&) {
    }
    co_await spool::schedule(pool);
    co_return 1;
  };
  auto done = spool::start(p, body(p, pr.get_future()), source.get_token());
  p.wait_idle();
  source.request_stop();
  EXPECT_THROW(done.get(), spool::task_cancelled);
}

// ---- task groups ----

TEST(GroupStopToken, CancelStopsTheTokenOfTheGroupAndItsChildren) {
  spool::pool p(pool_config(1));
  spool::task_group parent(p);
  spool::task_group child(parent);
  std::stop_token pt = parent.get_stop_token();
  std::stop_token ct = child.get_stop_token();
  EXPECT_TRUE(pt.stop_possible());
  EXPECT_FALSE(ct.stop_requested());
  std::latch started(1);
  gate release;
  hold_workers(p, started, release);
  std::atomic<bool> ran{false};
  auto f = p.submit(child.get_stop_token(), [&ran] { ran = true; });
  std::atomic<bool> saw_stop{false};
  child.run([&saw_stop](std::stop_token st) { saw_stop = st.stop_requested(); });
  parent.cancel();
  EXPECT_TRUE(pt.stop_requested());
  EXPECT_TRUE(ct.stop_requested());
  EXPECT_THROW(f.get(), spool::task_cancelled);
  release.open();
  EXPECT_EQ(parent.wait(), spool::group_status::cancelled);
  EXPECT_FALSE(ran.load());
  EXPECT_FALSE(saw_stop.load());  // skipped: the group was cancelled before it started
  spool::task_group late(p);
  late.cancel();
  EXPECT_TRUE(late.get_stop_token().stop_requested());  // made after the cancel
}

TEST(GroupStopToken, RunningTaskSeesTheGroupsStop) {
  spool::pool p(pool_config(2));
  spool::task_group g(p);
  std::latch running(1);
  g.run([&running](std::stop_token st) {
    running.count_down();
    while (!st.stop_requested()) std::this_thread::yield();
  });
  running.wait();
  g.cancel();
  EXPECT_EQ(g.wait(), spool::group_status::cancelled);
}

// ---- races ----

// Stop requests race the tasks' starts: each task either ran (and its future has the value)
// or was cancelled (and its callable never ran), and every callable is released once.
TEST(StopTokenStress, StopRacesStart) {
  spool::pool p(pool_config(2));
  const int n = stress_iterations(20000);
  std::atomic<int> released{0};
  std::atomic<int> ran{0};
  std::vector<std::stop_source> sources(static_cast<std::size_t>(n));
  std::vector<spool::future<int>> futures;
  futures.reserve(sources.size());
  for (auto& s : sources) {
    futures.push_back(p.submit(s.get_token(), [&ran, c = release_counter(released)] {
      ++ran;
      return 1;
    }));
  }
  std::thread stopper([&] {
    for (auto& s : sources) s.request_stop();
  });
  int values = 0;
  int cancelled = 0;
  for (auto& f : futures) {
    try {
      values += f.get();
    } catch (const spool::task_cancelled&) {
      ++cancelled;
    }
  }
  stopper.join();
  p.wait_idle();
  EXPECT_EQ(values, ran.load());
  EXPECT_EQ(values + cancelled, n);
  EXPECT_EQ(released.load(), n);
}

// Stops race the completion of what coroutines await: each coroutine ends once, with the value
// or task_cancelled.
TEST(StopTokenStress, CoroutineStopRacesCompletion) {
  spool::pool p(pool_config(2));
  const int n = stress_iterations(5000);
  std::vector<spool::promise<int>> promises;
  std::vector<std::stop_source> sources(static_cast<std::size_t>(n));
  std::vector<spool::future<int>> done;
  promises.reserve(sources.size());
  done.reserve(sources.size());
  for (int i = 0; i < n; ++i) {
    promises.emplace_back(p);
    done.push_back(spool::start(p, await_it(promises.back().get_future()),
                                sources[static_cast<std::size_t>(i)].get_token()));
  }
  std::thread stopper([&] {
    for (auto& s : sources) s.request_stop();
  });
  for (auto& pr : promises) pr.set_value(1);
  stopper.join();
  int values = 0;
  int cancelled = 0;
  for (auto& d : done) {
    try {
      values += d.get();
    } catch (const spool::task_cancelled&) {
      ++cancelled;
    }
  }
  EXPECT_EQ(values + cancelled, n);
}

}  // namespace
