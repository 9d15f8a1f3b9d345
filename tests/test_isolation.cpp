// spool::isolate: a wait inside an isolation region runs only that region's tasks, so a task
// that waits and only afterwards releases another task cannot end up running that task under
// its own wait (the help-while-wait deadlock, src/README.md). And the region still helps with
// its own nested work, down to a one-thread pool. The outer tasks are waited for from another
// thread (get_elsewhere), so that they run on a worker.
#include <gtest/gtest.h>

#include <spool/parallel.hpp>
#include <spool/spool.hpp>
#include <spool/task_group.hpp>

#include <atomic>
#include <latch>
#include <memory>
#include <stdexcept>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using namespace spool_test;

int fib(spool::pool& p, int n) {
  if (n < 2) return n;
  spool::future<int> left = p.submit([&p, n] { return fib(p, n - 1); });
  const int right = fib(p, n - 2);
  return left.get() + right;
}

int fib_value(int n) { return n < 2 ? n : fib_value(n - 1) + fib_value(n - 2); }

// A wait inside a region runs the task it waits on directly, whatever that task's region: a
// task that submits b and then waits on b inside isolate() finishes on a one-thread pool (b,
// submitted outside the region, is in the only worker's deque). Another task that is not of
// the region (c, submitted after b, so above it in the deque) is still passed over.
TEST(Isolation, WaitRunsTheTaskItWaitsOnDirectly) {
  spool::pool p(pool_config(1));
  std::atomic<bool> c_ran{false};
  auto outer = p.submit([&] {
    auto b = p.submit([&] { return c_ran.load() ? -1 : 5; });
    p.post([&] { c_ran = true; });
    return spool::isolate([&] { return b.get(); });
  });
  EXPECT_EQ(get_elsewhere(outer), 5);
  p.wait_idle();
  EXPECT_TRUE(c_ran.load());
}

// Two threads, one of them held. Task A queues task C (high priority, so a wait's search finds
// it before anything else) which waits at a latch that A counts down after waiting on a
// future. Without isolation A's wait runs C, which never returns: the pool hangs.
TEST(Isolation, LatchCountedAfterTheWaitCompletes) {
  spool::pool p(pool_config(2));
  gate release;
  std::latch held(1);
  p.post([&] {
    held.count_down();
    release.wait();
  });
  held.wait();  // one worker is busy until A has finished: A's worker is the only free one

  std::latch counted(1);
  std::atomic<bool> c_ran{false};
  std::atomic<bool> c_saw_count{false};
  spool::future<int> a = p.submit([&] {
    p.post(spool::priority::high, [&] {
      counted.wait();
      c_saw_count = counted.try_wait();
      c_ran = true;
    });
    const int got = spool::isolate([&] {
      spool::future<int> b = p.submit([] { return 42; });
      return b.get();
    });
    counted.count_down();
    release.open();
    return got;
  });
  EXPECT_EQ(get_elsewhere(a), 42);
  p.wait_idle();
  EXPECT_TRUE(c_ran.load());
  EXPECT_TRUE(c_saw_count.load());
}

// The unrelated tasks sit in A's own deque, above the task A waits for: submitted from a
// nested region, they are not the outer region's, and the outer wait passes over them (more
// than it holds on its stack).
TEST(Isolation, OuterWaitPassesOverANestedRegionsTasks) {
  spool::pool p(pool_config(1));
  std::latch counted(1);
  std::atomic<int> c_ran{0};
  spool::future<int> a = p.submit([&] {
    const int got = spool::isolate([&] {
      spool::future<int> b = p.submit([] { return 7; });
      spool::isolate([&] {
        for (int i = 0; i < 100; ++i) {
          p.post([&] {
            counted.wait();
            ++c_ran;
          });
        }
      });
      return b.get();
    });
    counted.count_down();
    return got;
  });
  EXPECT_EQ(get_elsewhere(a), 7);
  p.wait_idle();
  EXPECT_EQ(c_ran.load(), 100);
}

// A fork's join takes back what the left side pushed above the forked half; inside a region
// it leaves another region's task there (the left side queued it from a nested region).
TEST(Isolation, ForkJoinPassesOverANestedRegionsTask) {
  spool::pool p(pool_config(1));
  std::latch counted(1);
  std::atomic<bool> c_ran{false};
  std::atomic<int> sides{0};
  spool::future<void> a = p.submit([&] {
    spool::isolate([&] {
      spool::parallel_invoke(
          p,
          [&] {
            spool::isolate([&] {
              p.post([&] {
                counted.wait();
                c_ran = true;
              });
            });
            ++sides;
          },
          [&] { ++sides; });
    });
    counted.count_down();
  });
  get_elsewhere(a);
  p.wait_idle();
  EXPECT_EQ(sides.load(), 2);
  EXPECT_TRUE(c_ran.load());
}

// Nested fork/join inside a region on a one-thread pool: the lone worker's waits run the
// region's own tasks (and their descendants, which inherit the region).
TEST(Isolation, NestedForkJoinFinishesOnOneThread) {
  spool::pool p(pool_config(1));
  spool::future<int> r = p.submit([&] { return spool::isolate([&] { return fib(p, 16); }); });
  EXPECT_EQ(get_elsewhere(r), fib_value(16));
}

TEST(Isolation, TaskGroupAndParallelJoinInsideARegionOnOneThread) {
  spool::pool p(pool_config(1));
  std::atomic<int> ran{0};
  spool::future<void> r = p.submit([&] {
    spool::isolate([&] {
      spool::task_group g(p);
      for (int i = 0; i < 20; ++i) {
        g.run([&] {
          spool::task_group inner(p);
          for (int j = 0; j < 5; ++j) inner.run([&] { ++ran; });
          inner.wait();
        });
      }
      g.wait();
    });
  });
  get_elsewhere(r);
  EXPECT_EQ(ran.load(), 100);
}

// A region's high- and low-priority submissions go through the shared queue; the isolated
// wait takes them from there (a one-thread pool has nobody else to run them).
TEST(Isolation, WaitTakesTheRegionsTasksFromTheSharedQueue) {
  spool::pool p(pool_config(1));
  std::latch counted(1);
  std::atomic<bool> c_ran{false};
  spool::future<int> r = p.submit([&] {
    p.post(spool::priority::high, [&] {
      counted.wait();
      c_ran = true;
    });
    const int got = spool::isolate([&] {
      spool::future<int> hi = p.submit(spool::priority::high, [] { return 1; });
      spool::future<int> lo = p.submit(spool::priority::low, [] { return 2; });
      spool::future<int> normal = p.submit([] { return 4; });
      return lo.get() + hi.get() + normal.get();
    });
    counted.count_down();
    return got;
  });
  EXPECT_EQ(get_elsewhere(r), 7);
  p.wait_idle();
  EXPECT_TRUE(c_ran.load());
}

TEST(Isolation, ReturnsTheValueAndLetsExceptionsThrough) {
  spool::pool p(pool_config(2));
  // Off a worker it simply runs f.
  EXPECT_EQ(spool::isolate([] { return 3; }), 3);
  int x = 0;
  int& ref = spool::isolate([&x]() -> int& { return x; });
  EXPECT_EQ(&ref, &x);
  spool::future<int> r = p.submit([&] {
    try {
      spool::isolate([]() -> int { throw std::runtime_error("inside"); });
    } catch (const std::runtime_error&) {
      // After the throw the worker is back outside the region: a plain wait helps as before.
      return fib(p, 10);
    }
    return -1;
  });
  EXPECT_EQ(get_elsewhere(r), fib_value(10));
}

// Many tasks at once, each the latch scenario: it queues a task that waits for it, then
// waits (futures, groups, fork/join) inside a region, then releases the queued task.
TEST(Isolation, StressRegionsAlongsideBlockedUnrelatedTasks) {
  spool::pool p(pool_config(4));
  const int outer = stress_iterations(2000);
  std::vector<std::unique_ptr<std::latch>> latches;
  std::atomic<int> blocked_done{0};
  std::atomic<long> sum{0};
  std::vector<spool::future<void>> done;
  for (int i = 0; i < outer; ++i) latches.push_back(std::make_unique<std::latch>(1));
  for (int i = 0; i < outer; ++i) {
    done.push_back(p.submit([&, i] {
      p.post(i % 2 == 0 ? spool::priority::high : spool::priority::normal, [&, i] {
        latches[i]->wait();
        ++blocked_done;
      });
      spool::isolate([&] {
        spool::task_group g(p);
        for (int k = 0; k < 4; ++k) g.run([&] { sum += fib(p, 8); });
        spool::parallel_invoke(
            p, [&] { sum += fib(p, 6); }, [&] { sum += fib(p, 5); });
        g.wait();
      });
      latches[i]->count_down();
    }));
  }
  for (auto& f : done) get_elsewhere(f);
  p.wait_idle();
  EXPECT_EQ(blocked_done.load(), outer);
  EXPECT_EQ(sum.load(),
            static_cast<long>(outer) * (4 * fib_value(8) + fib_value(6) + fib_value(5)));
}

}  // namespace
