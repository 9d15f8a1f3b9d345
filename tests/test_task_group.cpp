// Task groups: running into a group and waiting for it (from outside and from inside the pool),
// fork/join with a group per level, cancellation (before start, through the token, after the
// fact, through a parent), timed waits, exceptions, on_finished, nesting, shutdown(discard),
// refused submissions, and a stress run of all of it at once. No sleeps, no timing assertions:
// tasks that must stay pending are held on latches.
#include <gtest/gtest.h>

#include <spool/spool.hpp>
#include <spool/task_group.hpp>

#include <atomic>
#include <barrier>
#include <chrono>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using namespace spool_test;
using spool::group_status;
using spool::task_group;

// Records every on_finished call: how many, and the last status and exception.
struct drain_log {
  std::mutex mu;
  int calls = 0;
  group_status last = group_status::completed;
  std::exception_ptr failure;

  auto callback() {
    return [this](group_status how, std::exception_ptr e) {
      std::lock_guard lock(mu);
      ++calls;
      last = how;
      failure = std::move(e);
    };
  }
  int count() {
    std::lock_guard lock(mu);
    return calls;
  }
};

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  }
}

}  // namespace

TEST(TaskGroup, RunAndWaitCountsEveryTask) {
  spool::pool p{pool_config(2)};
  task_group g{p};
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    if (i % 2 == 0) {
      g.run([&ran] { ++ran; });
    } else {
      g.run([&ran](spool::cancellation_token t) {
        EXPECT_FALSE(t.cancelled());
        ++ran;
      });
    }
  }
  EXPECT_EQ(g.wait(), group_status::completed);
  EXPECT_EQ(ran.load(), 100);
  EXPECT_EQ(g.submitted(), 100u);
  EXPECT_EQ(g.completed(), 100u);
  EXPECT_EQ(g.failed(), 0u);
  EXPECT_EQ(g.cancelled(), 0u);

  // The group is reusable: a second batch, at another priority too, waits for its own tasks.
  for (int i = 0; i < 50; ++i)
    g.run(i % 2 == 0 ? spool::priority::high : spool::priority::low, [&ran] { ++ran; });
  EXPECT_EQ(g.wait(), group_status::completed);
  EXPECT_EQ(ran.load(), 150);
  EXPECT_EQ(g.completed(), 150u);
  EXPECT_EQ(g.wait(), group_status::completed);  // nothing pending: at once
}

TEST(TaskGroup, WaitOnAnEmptyGroupReturnsAtOnce) {
  spool::pool p{pool_config(1)};
  task_group g{p};
  EXPECT_EQ(g.wait(), group_status::completed);
  EXPECT_TRUE(g.wait_for(std::chrono::seconds(0)));
  EXPECT_EQ(g.submitted(), 0u);
}

// A task on a one-thread pool runs a group and waits for it: the lone worker must run the
// group's tasks itself while it waits, or this deadlocks. Its submissions go to its own deque,
// so the bounded queue (capacity 1, blocking) cannot stop it either.
TEST(TaskGroup, WaitInsideATaskOnAOneThreadPool) {
  spool::pool p{pool_config(1, 1, spool::full_policy::block)};
  std::atomic<int> ran{0};
  auto f = p.submit([&] {
    task_group g{p};
    for (int i = 0; i < 100; ++i) g.run([&ran] { ++ran; });
    const group_status how = g.wait();
    EXPECT_EQ(ran.load(), 100);
    return how;
  });
  EXPECT_EQ(f.get(), group_status::completed);
  EXPECT_EQ(ran.load(), 100);
}

namespace {

// fib with a group per level: the submitted half runs in the group, the other half here.
long fib(spool::pool& p, int n) {
  if (n < 2) return n;
  long left = 0;
  task_group g{p};
  g.run([&p, &left, n] { left = fib(p, n - 1); });
  const long right = fib(p, n - 2);
  EXPECT_EQ(g.wait(), group_status::completed);
  return left + right;
}

}  // namespace

TEST(TaskGroup, RecursiveForkJoinWithAGroupPerLevel) {
  for (unsigned threads : {1u, 3u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    EXPECT_EQ(fib(p, 17), 1597);                                   // waited for from outside
    EXPECT_EQ(p.submit([&p] { return fib(p, 18); }).get(), 2584);  // and from a task
  }
}

// Cancelled while every worker is held: none of the queued bodies runs, each counts as
// cancelled in the group and in the pool, and tasks run into the group afterwards are accepted
// and skipped the same way.
TEST(TaskGroup, CancelBeforeStartSkipsEveryQueuedTask) {
  constexpr int queued = 40;
  spool::pool p{pool_config(2)};
  std::latch started{2}, release{1};
  hold_workers(p, started, release);
  const std::uint64_t cancelled_before = p.statistics().cancelled;

  task_group g{p};
  std::atomic<int> ran{0}, released{0};
  for (int i = 0; i < queued; ++i) g.run([&ran, r = release_counter(released)] { ++ran; });
  EXPECT_FALSE(g.is_cancelled());
  g.cancel();
  EXPECT_TRUE(g.is_cancelled());
  release.count_down();
  EXPECT_EQ(g.wait(), group_status::cancelled);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(released.load(), queued);  // skipped callables are destroyed, not leaked
  EXPECT_EQ(g.cancelled(), static_cast<std::uint64_t>(queued));
  EXPECT_EQ(g.completed(), 0u);
  EXPECT_EQ(g.submitted(), static_cast<std::uint64_t>(queued));

  g.cancel();  // idempotent
  for (int i = 0; i < 5; ++i) g.run([&ran] { ++ran; });
  EXPECT_EQ(g.wait(), group_status::cancelled);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(g.cancelled(), static_cast<std::uint64_t>(queued + 5));
  EXPECT_EQ(g.submitted(), static_cast<std::uint64_t>(queued + 5));

  p.wait_idle();  // the pool counts a task after the group has
  EXPECT_EQ(p.statistics().cancelled - cancelled_before, static_cast<std::uint64_t>(queued + 5));
}

// A running task sees the cancellation through its token and stops; it still completed.
TEST(TaskGroup, RunningTaskObservesTheToken) {
  spool::pool p{pool_config(2)};
  task_group g{p};
  std::latch running{1};
  std::atomic<bool> saw_it{false};
  g.run([&](spool::cancellation_token token) {
    running.count_down();
    while (!token.cancelled()) std::this_thread::yield();
    saw_it = true;
  });
  running.wait();
  g.cancel();
  EXPECT_EQ(g.wait(), group_status::cancelled);
  EXPECT_TRUE(saw_it.load());
  EXPECT_EQ(g.completed(), 1u);
  EXPECT_EQ(g.cancelled(), 0u);
}

TEST(TaskGroup, TokensOutliveTheGroupAndDefaultTokensAreNeverCancelled) {
  spool::pool p{pool_config(1)};
  spool::cancellation_token none;
  EXPECT_FALSE(none.cancelled());
  spool::cancellation_token kept;
  {
    task_group g{p};
    kept = g.token();
    spool::cancellation_token copy = kept;
    EXPECT_FALSE(copy.cancelled());
    g.cancel();
    EXPECT_TRUE(copy.cancelled());
  }
  EXPECT_TRUE(kept.cancelled());  // the group is gone; the token still answers
  none = kept;
  EXPECT_TRUE(none.cancelled());
}

// wait_for is false while the group's task is held on a latch and true once it is released,
// from outside the pool and from a worker (which helps, finds nothing, and times out).
TEST(TaskGroup, TimedWaitFailsWhileHeldAndSucceedsAfterRelease) {
  spool::pool p{pool_config(2)};
  task_group g{p};
  std::latch running{1}, release{1};
  g.run([&] {
    running.count_down();
    release.wait();
  });
  running.wait();
  EXPECT_FALSE(g.wait_for(std::chrono::milliseconds(20)));
  EXPECT_FALSE(g.wait_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(5)));
  EXPECT_FALSE(g.wait_until(std::chrono::system_clock::now() + std::chrono::milliseconds(5)));
  EXPECT_FALSE(p.submit([&g] { return g.wait_for(std::chrono::milliseconds(20)); }).get());
  release.count_down();
  EXPECT_TRUE(g.wait_for(std::chrono::hours(1)));
  EXPECT_TRUE(g.wait_until(std::chrono::steady_clock::now()));
  EXPECT_EQ(g.wait(), group_status::completed);
}

// A worker waiting with a deadline is woken by the drain, not by the deadline.
TEST(TaskGroup, TimedWaitOnAWorkerIsWokenByTheDrain) {
  spool::pool p{pool_config(2)};
  task_group g{p};
  std::latch running{1}, release{1}, waiting{1};
  g.run([&] {
    running.count_down();
    release.wait();
  });
  running.wait();
  auto waited = p.submit([&] {
    waiting.count_down();
    return g.wait_for(std::chrono::hours(1));
  });
  waiting.wait();
  release.count_down();
  EXPECT_TRUE(waited.get());
}

// The first wait() rethrows the group's first exception; later waits report failed without
// rethrowing, also after a new batch with another exception. on_finished keeps getting the
// first exception.
TEST(TaskGroup, FirstExceptionIsRethrownOnceThenTheGroupReportsFailed) {
  spool::pool p{pool_config(2)};
  task_group g{p};
  drain_log log;
  g.on_finished(log.callback());
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) {
    g.run([&ran, i] {
      ++ran;
      if (i == 3) throw std::runtime_error("first");
    });
  }
  try {
    g.wait();
    ADD_FAILURE() << "wait() did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "first");
  }
  EXPECT_EQ(ran.load(), 10);
  EXPECT_EQ(g.failed(), 1u);
  EXPECT_EQ(g.completed(), 9u);
  EXPECT_EQ(g.wait(), group_status::failed);

  g.run([] { throw std::runtime_error("second"); });
  EXPECT_EQ(g.wait(), group_status::failed);
  EXPECT_EQ(g.failed(), 2u);
  EXPECT_GE(log.count(), 2);
  std::lock_guard lock(log.mu);
  EXPECT_EQ(log.last, group_status::failed);
  ASSERT_NE(log.failure, nullptr);
  EXPECT_EQ(message_of(log.failure), "first");
}

// The exception reaches the waiter whichever way it waits: from a task too.
TEST(TaskGroup, ExceptionIsRethrownToAWaitingTask) {
  spool::pool p{pool_config(1)};
  auto f = p.submit([&p] {
    task_group g{p};
    g.run([] { throw std::logic_error("inside"); });
    try {
      g.wait();
    } catch (const std::logic_error& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  });
  EXPECT_EQ(f.get(), "inside");
}

// One on_finished call per drain, made before wait() returns, with the drain's status; the
// first task of each batch is held until the batch is in, so the count cannot reach zero early.
TEST(TaskGroup, OnFinishedIsCalledOncePerDrainBeforeWaitReturns) {
  spool::pool p{pool_config(2)};
  task_group g{p};
  drain_log log;
  std::atomic<int> on_worker{0};
  g.on_finished([&](group_status how, std::exception_ptr e) {
    if (spool::this_worker_index() >= 0) ++on_worker;
    log.callback()(how, std::move(e));
  });
  auto batch = [&](int n) {
    std::latch release{1};
    g.run([&release] { release.wait(); });
    for (int i = 1; i < n; ++i) g.run([] {});
    release.count_down();
    return g.wait();
  };
  EXPECT_EQ(batch(20), group_status::completed);
  EXPECT_EQ(log.count(), 1);
  EXPECT_EQ(batch(5), group_status::completed);
  EXPECT_EQ(log.count(), 2);
  {
    std::lock_guard lock(log.mu);
    EXPECT_EQ(log.last, group_status::completed);
    EXPECT_EQ(log.failure, nullptr);
  }
  EXPECT_EQ(on_worker.load(), 2);  // called by the worker that finished the last task

  // A cancelled group skips the holding task too, so hold the workers instead.
  g.cancel();
  std::latch started{2}, release{1};
  hold_workers(p, started, release);
  for (int i = 0; i < 3; ++i) g.run([] {});
  release.count_down();
  EXPECT_EQ(g.wait(), group_status::cancelled);
  EXPECT_EQ(log.count(), 3);
  std::lock_guard lock(log.mu);
  EXPECT_EQ(log.last, group_status::cancelled);
}

// The callback may be the last thing to touch what the group's owner frees after wait().
TEST(TaskGroup, GroupCanBeDestroyedRightAfterItsDrainIsReported) {
  spool::pool p{pool_config(2)};
  for (int round = 0; round < stress_iterations(200); ++round) {
    auto owned = std::make_unique<int>(round);
    auto g = std::make_unique<task_group>(p);
    std::atomic<int> seen{-1};
    g->on_finished([&seen, v = owned.get()](group_status, std::exception_ptr) { seen = *v; });
    for (int i = 0; i < 3; ++i) g->run([] {});
    g->wait();
    g.reset();
    owned.reset();
    ASSERT_EQ(seen.load(), round);
  }
}

// A refused submission throws like pool::post and leaves the counts as they were; an empty
// "drain" (nothing ran) is not reported.
TEST(TaskGroup, RefusedSubmissionLeavesTheCountsUnchanged) {
  spool::pool p{pool_config(1, 1, spool::full_policy::reject)};
  std::latch started{1};
  gate release;  // after the pool: if the first run() throws, it opens before the pool drains
  hold_workers(p, started, release);
  task_group g{p};
  drain_log log;
  g.on_finished(log.callback());
  std::atomic<int> ran{0};
  g.run([&ran] { ++ran; });  // fills the queue
  EXPECT_EQ(error_code_of([&] { g.run([&ran] { ++ran; }); }), spool::errc::full);
  EXPECT_EQ(g.submitted(), 1u);
  EXPECT_FALSE(g.wait_for(std::chrono::milliseconds(5)));
  release.open();
  EXPECT_EQ(g.wait(), group_status::completed);
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(g.completed(), 1u);
  EXPECT_EQ(log.count(), 1);

  p.close();
  EXPECT_EQ(error_code_of([&] { g.run([&ran] { ++ran; }); }), spool::errc::shut_down);
  EXPECT_EQ(g.submitted(), 1u);
  EXPECT_EQ(g.wait(), group_status::completed);
  EXPECT_EQ(log.count(), 1);
}

// A callable whose copy throws is reported as pool::post reports it: no_memory, nothing
// counted, nothing run.
TEST(TaskGroup, CallableThatCannotBeCopiedIsReportedLikePost) {
  struct throws_on_copy {
    throws_on_copy() = default;
    throws_on_copy(const throws_on_copy&) { throw std::runtime_error("copy"); }
    void operator()() const {}
  };
  spool::pool p{pool_config(1)};
  task_group g{p};
  const throws_on_copy f;
  EXPECT_EQ(error_code_of([&] { g.run(f); }), spool::errc::no_memory);
  EXPECT_EQ(error_code_of([&] { p.post(f); }), spool::errc::no_memory);
  EXPECT_EQ(g.submitted(), 0u);
  EXPECT_EQ(g.wait(), group_status::completed);
}

// An exception from on_finished goes to the pool's on_exception; the group is unaffected.
TEST(TaskGroup, ThrowingCallbackGoesToOnException) {
  std::atomic<int> reported{0};
  spool::config cfg = pool_config(1);
  cfg.on_exception = [&reported](std::exception_ptr e) {
    if (message_of(e) == "callback") ++reported;
  };
  spool::pool p{cfg};
  task_group g{p};
  g.on_finished([](group_status, std::exception_ptr) { throw std::runtime_error("callback"); });
  g.run([] {});
  EXPECT_EQ(g.wait(), group_status::completed);
  EXPECT_EQ(reported.load(), 1);
}

// The parent waits for its child's tasks; the child drains first.
TEST(TaskGroup, ParentWaitsForNestedGroupsTasks) {
  spool::pool p{pool_config(2)};
  task_group parent{p};
  task_group child{parent};
  drain_log parent_log, child_log;
  std::atomic<int> order{0}, child_reported_at{0}, parent_reported_at{0};
  parent.on_finished([&](group_status how, std::exception_ptr e) {
    parent_reported_at = ++order;
    parent_log.callback()(how, std::move(e));
  });
  child.on_finished([&](group_status how, std::exception_ptr e) {
    child_reported_at = ++order;
    child_log.callback()(how, std::move(e));
  });
  std::latch running{1}, release{1};
  std::atomic<bool> done{false};
  child.run([&] {
    running.count_down();
    release.wait();
    done = true;
  });
  running.wait();
  EXPECT_FALSE(parent.wait_for(std::chrono::milliseconds(20)));
  release.count_down();
  EXPECT_EQ(parent.wait(), group_status::completed);
  EXPECT_TRUE(done.load());
  EXPECT_TRUE(child.wait_for(std::chrono::seconds(0)));
  EXPECT_EQ(child_reported_at.load(), 1);
  EXPECT_EQ(parent_reported_at.load(), 2);
  EXPECT_EQ(parent.submitted(), 0u);  // counters are the group's own tasks
  EXPECT_EQ(child.completed(), 1u);
}

// Cancelling the parent cancels the child: its queued tasks skip and its token says so; the
// child's own cancel does not reach the parent.
TEST(TaskGroup, ParentCancelReachesNestedGroups) {
  spool::pool p{pool_config(1)};
  std::latch started{1}, release{1};
  hold_workers(p, started, release);
  task_group parent{p};
  task_group child{parent};
  task_group grandchild{child};
  std::atomic<int> ran{0};
  for (int i = 0; i < 5; ++i) child.run([&ran] { ++ran; });
  for (int i = 0; i < 5; ++i) grandchild.run([&ran] { ++ran; });
  auto token = grandchild.token();
  parent.cancel();
  EXPECT_TRUE(child.is_cancelled());
  EXPECT_TRUE(grandchild.is_cancelled());
  EXPECT_TRUE(token.cancelled());
  release.count_down();
  EXPECT_EQ(parent.wait(), group_status::cancelled);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(child.cancelled(), 5u);
  EXPECT_EQ(grandchild.cancelled(), 5u);
  EXPECT_EQ(child.wait(), group_status::cancelled);

  task_group other{p};
  task_group nested{other};
  nested.cancel();
  EXPECT_FALSE(other.is_cancelled());
  other.run([&ran] { ++ran; });
  EXPECT_EQ(other.wait(), group_status::completed);
  EXPECT_EQ(nested.wait(), group_status::cancelled);
  EXPECT_EQ(ran.load(), 1);
}

// An exception in the child is reported by the child's wait and by the parent's.
TEST(TaskGroup, NestedFailureIsReportedByTheParent) {
  spool::pool p{pool_config(2)};
  task_group parent{p};
  task_group child{parent};
  parent.run([] {});
  child.run([] { throw std::runtime_error("child"); });
  try {
    parent.wait();
    ADD_FAILURE() << "parent.wait() did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "child");
  }
  EXPECT_THROW(child.wait(), std::runtime_error);
  EXPECT_EQ(parent.wait(), group_status::failed);
  EXPECT_EQ(child.wait(), group_status::failed);
  EXPECT_EQ(parent.failed(), 0u);
  EXPECT_EQ(child.failed(), 1u);
}

// A nested group created and waited for inside a task of its parent; the parent is destroyed
// before a group nested in it.
TEST(TaskGroup, NestedGroupsInsideTasksAndOutlivingTheParent) {
  spool::pool p{pool_config(1)};
  std::atomic<int> ran{0};
  auto parent = std::make_unique<task_group>(p);
  parent->run([&] {
    task_group inner{*parent};
    for (int i = 0; i < 10; ++i) inner.run([&ran] { ++ran; });
    EXPECT_EQ(inner.wait(), group_status::completed);
  });
  EXPECT_EQ(parent->wait(), group_status::completed);
  EXPECT_EQ(ran.load(), 10);

  auto child = std::make_unique<task_group>(*parent);
  parent.reset();
  child->run([&ran] { ++ran; });
  EXPECT_EQ(child->wait(), group_status::completed);
  EXPECT_EQ(ran.load(), 11);
}

// Waiting from a worker of another pool blocks that thread (it helps only its own pool).
TEST(TaskGroup, WaitFromAnotherPoolsWorker) {
  spool::pool a{pool_config(1)}, b{pool_config(1)};
  task_group g{b};
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) g.run([&ran] { ++ran; });
  EXPECT_EQ(a.submit([&g] { return g.wait(); }).get(), group_status::completed);
  EXPECT_EQ(ran.load(), 10);
}

// shutdown(discard) drops the group's queued tasks: each counts as cancelled, the callables
// are released, and a thread already waiting on the group wakes with cancelled.
TEST(TaskGroup, ShutdownDiscardCancelsQueuedGroupTasks) {
  constexpr int queued = 20;
  std::atomic<int> ran{0}, released{0};
  spool::pool p{pool_config(1)};
  std::latch started{1}, release{1};
  hold_workers(p, started, release);
  task_group g{p};
  drain_log log;
  g.on_finished(log.callback());
  for (int i = 0; i < queued; ++i) g.run([&ran, r = release_counter(released)] { ++ran; });

  std::atomic<group_status> waited{group_status::completed};
  std::thread waiter([&] { waited = g.wait(); });
  std::size_t dropped = 0;
  std::thread stopper([&] { dropped = p.shutdown(spool::shutdown_mode::discard); });
  waiter.join();  // returns once every queued task was dropped; the held one is not the group's
  release.count_down();
  stopper.join();

  EXPECT_EQ(waited.load(), group_status::cancelled);
  EXPECT_EQ(dropped, static_cast<std::size_t>(queued));
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(released.load(), queued);
  EXPECT_EQ(g.cancelled(), static_cast<std::uint64_t>(queued));
  EXPECT_TRUE(g.is_cancelled());
  EXPECT_EQ(log.count(), 1);
  EXPECT_EQ(error_code_of([&] { g.run([] {}); }), spool::errc::shut_down);
  EXPECT_EQ(g.wait(), group_status::cancelled);
}

// Many groups at once: outside threads each run batches into groups of their own (some
// cancelled midway, some with a nested group, some with tasks that run more tasks into the
// group or run and wait on groups of their own), all share one more group that they run into
// and wait on together, and groups are destroyed right after their wait. Every task is
// accounted for exactly once.
TEST(TaskGroup, StressManyGroupsFromManyThreads) {
  constexpr int threads = 3;
  constexpr int per_batch = 24;
  const int rounds = stress_iterations(400);
  spool::pool p{pool_config(3)};
  std::barrier sync{threads};
  std::atomic<task_group*> shared{nullptr};
  std::atomic<int> shared_ran{0};
  auto one_batch = [&p](int round, int me) {
    std::atomic<int> ran{0}, inner_ran{0}, spawned{0}, released{0};
    int inner_groups = 0;
    drain_log log;
    task_group g{p};
    g.on_finished(log.callback());
    std::unique_ptr<task_group> nested;
    if (round % 4 == 2) nested = std::make_unique<task_group>(g);
    const bool cancel_midway = (round + me) % 3 == 1;
    for (int i = 0; i < per_batch; ++i) {
      if (cancel_midway && i == per_batch / 2) g.cancel();
      if (i % 6 == 0) {
        ++inner_groups;
        g.run([&p, &inner_ran, r = release_counter(released)](spool::cancellation_token t) {
          task_group inner{p};
          for (int j = 0; j < 4; ++j) inner.run([&inner_ran] { ++inner_ran; });
          if (t.cancelled()) inner.cancel();
          inner.wait();
        });
      } else if (i % 6 == 3) {
        g.run([&g, &ran, &spawned, &released, r = release_counter(released)] {
          ++spawned;
          g.run([&ran, r2 = release_counter(released)] { ++ran; });
          ++ran;
        });
      } else if (nested != nullptr && i % 2 == 0) {
        nested->run([&ran, r = release_counter(released)] { ++ran; });
      } else {
        g.run([&ran, r = release_counter(released)] { ++ran; });
      }
    }
    const group_status how = g.wait();
    std::uint64_t finished = g.completed() + g.cancelled();
    std::uint64_t submitted = g.submitted();
    if (nested != nullptr) {
      EXPECT_TRUE(nested->wait_for(std::chrono::seconds(0)));
      finished += nested->completed() + nested->cancelled();
      submitted += nested->submitted();
      nested.reset();
    }
    EXPECT_EQ(how, cancel_midway ? group_status::cancelled : group_status::completed);
    EXPECT_GE(log.count(), 1);
    EXPECT_EQ(g.failed(), 0u);
    EXPECT_EQ(submitted, static_cast<std::uint64_t>(per_batch + spawned.load()));
    EXPECT_EQ(finished, submitted);
    EXPECT_EQ(released.load(), per_batch + spawned.load());
    if (!cancel_midway) {
      EXPECT_EQ(g.cancelled(), 0u);
      EXPECT_EQ(inner_ran.load(), 4 * inner_groups);
      EXPECT_EQ(spawned.load(), per_batch / 6);
    }
  };
  auto body = [&](int me) {
    for (int round = 0; round < rounds; ++round) {
      one_batch(round, me);
      // The shared group: every thread runs into it and waits on it at once.
      if (me == 0) shared = new task_group(p);
      sync.arrive_and_wait();
      task_group* s = shared.load();
      for (int i = 0; i < 8; ++i) s->run([&shared_ran] { ++shared_ran; });
      EXPECT_EQ(s->wait(), group_status::completed);
      sync.arrive_and_wait();
      if (me == 0) {
        EXPECT_EQ(s->completed(), static_cast<std::uint64_t>(8 * threads));
        delete shared.exchange(nullptr);
      }
    }
  };
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; ++t) ts.emplace_back(body, t);
  body(0);
  for (auto& t : ts) t.join();
  EXPECT_EQ(shared_ran.load(), 8 * threads * rounds);
}

namespace {

spool::config parking_config(unsigned threads, unsigned spin_rounds) {
  spool::config cfg = pool_config(threads);
  cfg.spin_rounds = spin_rounds;
  return cfg;
}

// A group destroyed without wait() hands its first exception to on_exception, once; the
// pool still counts every failure.
TEST(TaskGroup, DestroyedUnwaitedReportsItsFirstException) {
  std::mutex mu;
  std::vector<std::string> reported;
  spool::config cfg = pool_config(2);
  cfg.on_exception = [&](std::exception_ptr e) {
    std::lock_guard lock(mu);
    reported.push_back(message_of(e));
  };
  spool::pool p{cfg};
  std::latch first_failed{1};
  {
    task_group g{p};
    g.run([&] {
      first_failed.count_down();
      throw std::runtime_error("first");
    });
    first_failed.wait();
    g.run([] {});
    // Runs after the first task has thrown (it waits at the latch the throwing task opened
    // just before throwing, and the group records the first exception before its unit goes).
    g.run([&] {
      first_failed.wait();
      throw std::runtime_error("second");
    });
  }
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(reported.size(), 1u);
    EXPECT_TRUE(reported[0] == "first" || reported[0] == "second");
  }
  p.wait_idle();
  EXPECT_EQ(p.statistics().failed, 2u);
}

// Delivered otherwise, the exception is not reported again: rethrown by wait(), passed to
// on_finished, or left to a living parent (whose wait() rethrows it).
TEST(TaskGroup, DestroyedUnwaitedDoesNotReportWhatWasDelivered) {
  std::atomic<int> reported{0};
  spool::config cfg = pool_config(2);
  cfg.on_exception = [&](std::exception_ptr) { ++reported; };
  spool::pool p{cfg};
  {
    task_group g{p};
    g.run([] { throw std::runtime_error("waited"); });
    EXPECT_THROW(g.wait(), std::runtime_error);
  }
  {
    std::atomic<int> callbacks{0};
    task_group g{p};
    g.on_finished([&](group_status how, std::exception_ptr e) {
      if (how == group_status::failed && e != nullptr) ++callbacks;
    });
    g.run([] { throw std::runtime_error("to the callback"); });
    EXPECT_TRUE(g.wait_for(std::chrono::hours(1)));  // does not rethrow; the callback had it
    EXPECT_EQ(callbacks.load(), 1);
  }
  {
    task_group parent{p};
    {
      task_group child{parent};
      child.run([] { throw std::runtime_error("nested"); });
    }
    EXPECT_THROW(parent.wait(), std::runtime_error);
  }
  EXPECT_EQ(reported.load(), 0);
  // A nested group whose parent's task_group is gone reports for itself.
  {
    auto parent = std::make_unique<task_group>(p);
    task_group child{*parent};
    parent.reset();
    child.run([] { throw std::runtime_error("orphan"); });
    EXPECT_TRUE(child.wait_for(std::chrono::hours(1)));
    EXPECT_EQ(reported.load(), 0);
  }
  EXPECT_EQ(reported.load(), 1);
}

// Without a handler the exception goes to stderr.
TEST(TaskGroup, DestroyedUnwaitedReportsToStderrWithoutAHandler) {
  spool::pool p{pool_config(1)};
  testing::internal::CaptureStderr();
  {
    task_group g{p};
    g.run([] { throw std::runtime_error("to stderr"); });
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("to stderr"), std::string::npos) << err;
  // The message says where it came from: not a posted task.
  EXPECT_NE(err.find("task_group destroyed without wait()"), std::string::npos) << err;
  EXPECT_EQ(err.find("posted task"), std::string::npos) << err;
}

}  // namespace

// One task per drain, waited for in turn from outside (wait, wait_for) and from a worker that
// helps and then parks: a lost wake-up hangs here (the watchdog turns that into a failure).
TEST(TaskGroup, StressDrainsRaceWaiters) {
  const int rounds = stress_iterations(5000);
  for (unsigned spin : {0u, 64u}) {
    SCOPED_TRACE(spin);
    spool::pool p{parking_config(2, spin)};
    task_group g{p};
    std::atomic<int> ran{0};
    for (int i = 0; i < rounds; ++i) {
      g.run([&ran] { ++ran; });
      switch (i % 3) {
        case 0:
          ASSERT_EQ(g.wait(), group_status::completed);
          break;
        case 1:
          ASSERT_TRUE(g.wait_for(std::chrono::hours(1)));
          break;
        default:
          ASSERT_EQ(p.submit([&g] { return g.wait(); }).get(), group_status::completed);
      }
      ASSERT_EQ(ran.load(), i + 1);
    }
    EXPECT_EQ(g.completed(), static_cast<std::uint64_t>(rounds));
  }
}

// Threads run into a nested group while it drains and restarts, and wait on the parent: the
// child's drain must be counted in the parent before anyone can see the child busy, so
// whatever a thread ran into the child before it waits on the parent has finished when that
// wait returns.
TEST(TaskGroup, StressNestedRunsRaceParentDrains) {
  constexpr int threads = 3;
  const int rounds = stress_iterations(5000);
  spool::pool p{parking_config(2, 0)};
  task_group parent{p};
  task_group child{parent};
  auto body = [&] {
    for (int i = 0; i < rounds; ++i) {
      std::atomic<bool> done{false};
      child.run([&done] { done = true; });
      parent.wait();
      if (!done.load()) {
        ADD_FAILURE() << "parent.wait() returned before a task run into the group finished";
        return;
      }
    }
  };
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; ++t) ts.emplace_back(body);
  body();
  for (auto& t : ts) t.join();
  EXPECT_EQ(parent.wait(), group_status::completed);
  EXPECT_EQ(child.completed(), static_cast<std::uint64_t>(threads * rounds));
}

// Fork/join storms: two outside threads run fib with a group per level on the same pool.
TEST(TaskGroup, StressForkJoinStorms) {
  const int rounds = stress_iterations(100);
  for (unsigned threads : {2u, 3u}) {
    spool::pool p{parking_config(threads, threads == 2 ? 0 : 64)};
    auto caller = [&] {
      for (int r = 0; r < rounds; ++r) {
        const long v = r % 2 == 0 ? fib(p, 14) : p.submit([&p] { return fib(p, 14); }).get();
        if (v != 377) {
          ADD_FAILURE() << "fib(14) = " << v;
          return;
        }
      }
    };
    std::thread other(caller);
    caller();
    other.join();
  }
}

// Runs race cancel(): every task either ran (and counts completed) or was skipped (and counts
// cancelled), exactly once, and the callables are all released.
TEST(TaskGroup, StressRunRacesCancel) {
  constexpr int producers = 3;
  constexpr int per_producer = 40;
  const int rounds = stress_iterations(300);
  spool::pool p{parking_config(2, 0)};
  for (int round = 0; round < rounds; ++round) {
    std::atomic<int> ran{0}, released{0}, accepted{0};
    {
      task_group g{p};
      std::latch go{producers + 1};
      std::vector<std::thread> ts;
      for (int t = 0; t < producers; ++t) {
        ts.emplace_back([&] {
          go.arrive_and_wait();
          for (int i = 0; i < per_producer; ++i) {
            g.run([&ran, r = release_counter(released)] { ++ran; });
            accepted.fetch_add(1);
            accepted.notify_one();
          }
        });
      }
      go.arrive_and_wait();
      const int head_start = (round * 11) % (producers * per_producer);
      for (int seen = accepted.load(); seen < head_start; seen = accepted.load()) {
        accepted.wait(seen);
      }
      g.cancel();
      for (auto& t : ts) t.join();
      ASSERT_EQ(g.wait(), group_status::cancelled);
      ASSERT_EQ(g.submitted(), static_cast<std::uint64_t>(producers * per_producer));
      ASSERT_EQ(g.completed() + g.cancelled(), g.submitted());
      ASSERT_EQ(g.completed(), static_cast<std::uint64_t>(ran.load()));
      ASSERT_EQ(released.load(), producers * per_producer);
    }
  }
}
