// Delayed and periodic tasks (pool::post_after, post_at, post_every, submit_after): they run
// once (or every period) and never before their deadline; cancel() prevents what it says it
// prevents; a due timer refused by a closed pool reports the error; drain and discard
// shutdowns end pending timers as documented; each callable is released exactly once. No
// test asserts how late a timer fires (spool-bench's `timers` measures that).
#include <gtest/gtest.h>
#include <spool/spool.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core_testing.hpp"
#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using spool::detail::core_testing;
using spool_test::error_code_of;
using spool_test::gate;
using spool_test::hold_workers;
using spool_test::pool_config;
using spool_test::release_counter;
using spool_test::run_on_a_worker;

TEST(Timers, PostAfterRunsOnceNotBeforeItsDeadline) {
  spool::pool pool{pool_config(2)};
  std::latch done{1};
  std::atomic<int> runs{0};
  clock_type::time_point ran_at;
  const auto deadline = clock_type::now() + 20ms;
  spool::timer t = pool.post_at(deadline, [&] {
    ran_at = clock_type::now();
    runs.fetch_add(1);
    done.count_down();
  });
  EXPECT_TRUE(t.valid());
  done.wait();
  pool.wait_idle();
  EXPECT_GE(ran_at, deadline);
  EXPECT_EQ(runs.load(), 1);
  EXPECT_FALSE(t.active());
  EXPECT_FALSE(t.cancel()) << "its run has started: too late";
}

TEST(Timers, SubmitAfterDeliversTheResult) {
  spool::pool pool{pool_config(2)};
  const auto start = clock_type::now();
  auto f = pool.submit_after(
      5ms, [](int x) { return x * 2; }, 21);
  EXPECT_EQ(f.get(), 42);
  EXPECT_GE(clock_type::now() - start, 5ms);
}

TEST(Timers, DestroyingTheHandleLeavesTheTimerScheduled) {
  spool::pool pool{pool_config(2)};
  std::latch done{1};
  {
    (void)pool.post_after(2ms, [&] { done.count_down(); });
  }
  done.wait();
}

TEST(Timers, CancelBeforeTheDeadlinePreventsTheRunAndReleasesTheCallable) {
  std::atomic<int> released{0};
  std::atomic<int> runs{0};
  spool::pool pool{pool_config(2)};
  spool::timer t = pool.post_after(1h, [&, c = release_counter(released)] { runs.fetch_add(1); });
  EXPECT_TRUE(t.active());
  EXPECT_TRUE(t.cancel());
  EXPECT_EQ(released.load(), 1) << "cancel() of a waiting timer destroys the callable itself";
  EXPECT_FALSE(t.active());
  EXPECT_FALSE(t.cancel());
  auto f = pool.submit_after(1h, [] { return 1; });
  EXPECT_TRUE(f.cancel());
  EXPECT_THROW(f.get(), spool::task_cancelled);
  // Neither is pending any more: a drain does not wait an hour for them.
  pool.shutdown(spool::shutdown_mode::drain);
  EXPECT_EQ(runs.load(), 0);
}

TEST(Timers, CancelWhileItsTaskIsQueuedPreventsTheRun) {
  std::atomic<int> released{0};
  std::atomic<int> runs{0};
  spool::pool pool{pool_config(1)};
  std::latch started{1};
  gate release;
  hold_workers(pool, started, release);
  std::latch due{1};
  // The timer comes due while the only worker is busy: its task waits in the queue.
  spool::timer t = pool.post_after(0ms, [&, c = release_counter(released)] { runs.fetch_add(1); });
  auto marker = pool.submit_after(0ms, [&] { due.count_down(); });
  (void)marker;
  // Both are due once the timer thread has submitted the marker; it submits in deadline
  // order, so t's task is queued by then too. The marker runs only after release.
  while (pool.statistics().submitted < 3) std::this_thread::yield();
  EXPECT_TRUE(t.cancel());
  release.open();
  due.wait();
  pool.wait_idle();
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(released.load(), 1);
  EXPECT_EQ(pool.statistics().cancelled, 1u);
}

TEST(Timers, PeriodicRunsUntilCancelledFromItsOwnCallable) {
  std::atomic<int> released{0};
  spool::pool pool{pool_config(2)};
  std::atomic<int> runs{0};
  spool::timer t;
  std::mutex mu;
  std::latch handle_ready{1};
  std::latch stopped{1};
  std::atomic<bool> cancel_result{false};
  {
    std::lock_guard lock(mu);
    t = pool.post_every(1ms, [&, c = release_counter(released)] {
      handle_ready.wait();
      if (runs.fetch_add(1) + 1 == 3) {
        std::lock_guard lock(mu);
        cancel_result = t.cancel();
        stopped.count_down();
      }
    });
  }
  handle_ready.count_down();
  stopped.wait();
  pool.wait_idle();
  EXPECT_TRUE(cancel_result.load()) << "a live periodic timer is stopped by cancel()";
  EXPECT_EQ(runs.load(), 3);
  EXPECT_EQ(released.load(), 1) << "the callable is released after the run in progress";
  EXPECT_FALSE(t.active());
}

TEST(Timers, PeriodicExceptionGoesToTheHandlerAndTheTimerGoesOn) {
  std::atomic<int> failures{0};
  spool::config cfg = pool_config(2);
  cfg.on_exception = [&](std::exception_ptr) { failures.fetch_add(1); };
  spool::pool pool{cfg};
  std::latch three{3};
  std::atomic<int> runs{0};
  spool::timer t = pool.post_every(1ms, [&] {
    if (runs.fetch_add(1) < 3) {
      three.count_down();
      throw std::runtime_error("tick");
    }
  });
  three.wait();
  t.cancel();
  pool.wait_idle();
  EXPECT_EQ(failures.load(), 3);
  EXPECT_EQ(pool.statistics().failed, static_cast<std::uint64_t>(failures.load()));
}

TEST(Timers, BadPeriodIsAnInvalidArgument) {
  spool::pool pool{pool_config(1)};
  EXPECT_EQ(error_code_of([&] { (void)pool.post_every(0ms, [] {}); }),
            spool::errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { (void)pool.post_every(-1ms, [] {}); }),
            spool::errc::invalid_argument);
}

TEST(Timers, NeverMeansNever) {
  spool::pool pool{pool_config(1)};
  spool::timer t = pool.post_after(std::chrono::nanoseconds::max(), [] {});
  EXPECT_TRUE(t.active());
  EXPECT_TRUE(t.cancel());
}

TEST(Timers, DueTimerEntersAFullBoundedQueue) {
  spool::pool pool{pool_config(1, 1, spool::full_policy::reject)};
  std::latch started{1};
  gate release;
  hold_workers(pool, started, release);
  pool.post([] {});  // the queue is full now
  EXPECT_EQ(error_code_of([&] { pool.post([] {}); }), spool::errc::full);
  auto f = pool.submit_after(0ms, [] { return 3; });
  while (pool.statistics().submitted < 3) std::this_thread::yield();  // it came due
  release.open();
  EXPECT_EQ(f.get(), 3);
}

TEST(Timers, DueTimerOfAClosedPoolReportsShutDown) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::error_code> reported;
  spool::config cfg = pool_config(1);
  cfg.on_exception = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const spool::error& err) {
      std::lock_guard lock(mu);
      reported.push_back(err.code());
      cv.notify_all();
    }
  };
  std::atomic<int> released{0};
  spool::pool pool{cfg};
  pool.close();
  auto f = pool.submit_after(0ms, [] { return 1; });
  EXPECT_EQ(error_code_of([&] { f.get(); }), spool::errc::shut_down);
  spool::timer t = pool.post_after(0ms, [c = release_counter(released)] {});
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return !reported.empty(); });
  EXPECT_EQ(reported.front(), spool::errc::shut_down);
  EXPECT_EQ(released.load(), 1);
  EXPECT_FALSE(t.active());
}

TEST(TimersShutdown, DrainRunsOneShotTimersDueWithinItsBoundAndStopsPeriodicOnes) {
  std::atomic<int> released{0};
  std::atomic<int> runs{0};
  std::atomic<int> periodic_runs{0};
  spool::timer t1;
  spool::timer periodic;
  spool::future<int> f;
  {
    spool::config cfg = pool_config(2);
    cfg.drain_timers_within = 1min;
    spool::pool pool{cfg};
    t1 = pool.post_after(30ms, [&, c = release_counter(released)] { runs.fetch_add(1); });
    f = pool.submit_after(30ms, [] { return 7; });
    periodic = pool.post_every(1h, [&, c = release_counter(released)] { periodic_runs++; });
    EXPECT_EQ(pool.shutdown(spool::shutdown_mode::drain), 1u);  // the periodic timer
    EXPECT_EQ(error_code_of([&] { (void)pool.post_after(1ms, [] {}); }), spool::errc::shut_down);
  }
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(f.get(), 7);
  EXPECT_EQ(periodic_runs.load(), 0);
  EXPECT_EQ(released.load(), 2);
  // The pool is gone and every timer has ended, so the handles answer without it.
  EXPECT_FALSE(t1.cancel());
  EXPECT_FALSE(periodic.cancel());
}

// A drain never waits on the clock beyond its bound (0 by default): a timer that is never
// due, or due in an hour, is dropped and counted, and the destructor returns at once.
TEST(TimersShutdown, DrainDropsTimersNotDueAndCountsThem) {
  std::atomic<int> released{0};
  std::atomic<int> runs{0};
  spool::timer never;
  spool::timer later;
  spool::future<int> f;
  {
    spool::pool pool{pool_config(2)};
    never = pool.post_after(std::chrono::nanoseconds::max(),
                            [&, c = release_counter(released)] { runs.fetch_add(1); });
    later = pool.post_after(1h, [&, c = release_counter(released)] { runs.fetch_add(1); });
    f = pool.submit_after(1h, [] { return 1; });
    pool.post([] {});
    EXPECT_EQ(pool.shutdown(spool::shutdown_mode::drain), 3u);
  }
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(released.load(), 2);
  EXPECT_THROW(f.get(), spool::task_cancelled);
  EXPECT_FALSE(never.active());
  EXPECT_FALSE(later.cancel());
}

TEST(TimersShutdown, DestructorReturnsWithANeverDueTimerPending) {
  std::atomic<int> released{0};
  {
    spool::pool pool{pool_config(1)};
    (void)pool.post_after(std::chrono::nanoseconds::max(), [c = release_counter(released)] {});
    (void)pool.post_at(clock_type::time_point::max(), [c = release_counter(released)] {});
  }
  EXPECT_EQ(released.load(), 2);
}

// A timer already due when the drain starts still runs.
TEST(TimersShutdown, DrainRunsTimersAlreadyDue) {
  std::atomic<int> runs{0};
  spool::future<int> f;
  {
    spool::pool pool{pool_config(1)};
    (void)pool.post_after(0ms, [&] { runs.fetch_add(1); });
    f = pool.submit_after(-1ms, [] { return 5; });
  }
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(f.get(), 5);
}

TEST(TimersShutdown, DrainBoundMustNotBeNegative) {
  spool::config cfg = pool_config(1);
  cfg.drain_timers_within = -1ns;
  EXPECT_EQ(error_code_of([&] { spool::pool p{cfg}; }), spool::errc::invalid_argument);
}

TEST(TimersShutdown, DiscardDropsEveryPendingTimer) {
  std::atomic<int> released{0};
  std::atomic<int> runs{0};
  spool::pool pool{pool_config(2)};
  spool::timer t = pool.post_after(1h, [&, c = release_counter(released)] { runs.fetch_add(1); });
  spool::timer p = pool.post_every(1h, [&, c = release_counter(released)] { runs.fetch_add(1); });
  auto f = pool.submit_after(1h, [] { return 1; });
  // The count includes every dropped timer and submit_after task.
  EXPECT_EQ(pool.shutdown(spool::shutdown_mode::discard), 3u);
  EXPECT_EQ(runs.load(), 0);
  EXPECT_EQ(released.load(), 2);
  EXPECT_THROW(f.get(), spool::task_cancelled);
  EXPECT_FALSE(t.cancel());
  EXPECT_FALSE(p.cancel());
}

// A worker that parks while a timer is pending watches it: it parks until the deadline and
// fires the timer itself, and the timer thread backs it up (timers/README.md, "A worker
// watches the earliest deadline"). The timer still runs exactly once, not early, and the watch
// ends once nothing is pending.
TEST(TimerWatch, AnIdleWorkerWatchesThePendingTimer) {
  spool::config cfg = pool_config(2);
  cfg.spin_rounds = 0;
  spool::pool pool{cfg};
  const auto& core = spool::detail::pool_access::of(pool);
  std::atomic<int> runs{0};
  const auto deadline = clock_type::now() + 2s;
  auto f = pool.submit_after(2s, [&] {
    runs.fetch_add(1);
    return clock_type::now();
  });
  run_on_a_worker(pool);  // a worker runs this and then parks with the timer pending
  while ((core_testing::timer_watcher(core) < 0 || !core_testing::timer_thread_backs_up(core)) &&
         runs.load() == 0) {
    std::this_thread::yield();
  }
  const int watcher = core_testing::timer_watcher(core);
  ASSERT_EQ(runs.load(), 0) << "the machine was too slow to observe the watch";
  EXPECT_TRUE(watcher == 0 || watcher == 1) << watcher;
  EXPECT_GE(f.get(), deadline);
  EXPECT_EQ(runs.load(), 1);
  run_on_a_worker(pool);  // and parks again, with nothing pending
  while (core_testing::timer_watcher(core) >= 0) std::this_thread::yield();
  EXPECT_EQ(runs.load(), 1);
}

// A timer due while the watcher runs a long task still runs on another worker: the thread's
// backstop takes the watch back. Here the first timer's task waits for the second timer's.
// A pool each time: the thread's takeover pauses the watch (the next test), and each
// iteration should find it watched.
TEST(TimerWatch, ALongTaskOnTheWatcherDoesNotHoldBackTheNextTimer) {
  spool::config cfg = pool_config(2);
  cfg.spin_rounds = 0;
  for (int i = 0; i < stress_iterations(20); ++i) {
    spool::pool pool{cfg};
    std::promise<void> second_ran;
    auto second = second_ran.get_future();
    bool first_saw_second = false;
    auto f = pool.submit_after(2ms, [&] {
      // A hang guard only: the second timer is due 1 ms after this one starts at the latest.
      first_saw_second = second.wait_for(30s) == std::future_status::ready;
    });
    const spool::timer second_timer = pool.post_after(3ms, [&] { second_ran.set_value(); });
    run_on_a_worker(pool);  // a worker parks with both pending, watching the first
    f.get();
    EXPECT_TRUE(first_saw_second) << "iteration " << i;
  }
}

// While the watch is paused (after a takeover by the thread), a worker that parks with a
// timer pending does not watch it: the thread serves the deadline. Once the pause ends, the
// next worker to park watches again.
TEST(TimerWatch, APausedWatchLeavesTheDeadlineToTheThread) {
  spool::config cfg = pool_config(2);
  cfg.spin_rounds = 0;
  spool::pool pool{cfg};
  auto& core = spool::detail::pool_access::of(pool);
  core_testing::pause_timer_watch(core, clock_type::now() + 1h);
  spool::timer far = pool.post_after(1h, [] {});
  run_on_a_worker(pool);  // a worker runs this and then parks with the timer pending
  // Both workers parked, each after its last look, with the thread serving the deadline.
  while (core_testing::sleepers(core) < 2) std::this_thread::yield();
  EXPECT_EQ(core_testing::timer_watcher(core), -1);
  EXPECT_FALSE(core_testing::timer_thread_backs_up(core));

  core_testing::pause_timer_watch(core, clock_type::now());  // the pause ends
  run_on_a_worker(pool);  // and the worker that ran this parks again, watching
  const auto guard = clock_type::now() + 30s;
  while (core_testing::timer_watcher(core) < 0 && clock_type::now() < guard) {
    std::this_thread::yield();
  }
  EXPECT_GE(core_testing::timer_watcher(core), 0);
  EXPECT_TRUE(far.cancel());
}

// The pause a takeover starts: k_pause_min at first, doubled by a takeover that follows the
// last pause's end within k_pause_reset, up to k_pause_max, and k_pause_min again after a
// quiet k_pause_reset.
TEST(TimerWatch, TakeoversCloseTogetherLengthenThePause) {
  using spool::detail::timers;
  const auto t0 = clock_type::now();
  auto pause = timers::next_pause({}, clock_type::time_point{}, t0);
  EXPECT_EQ(pause, timers::k_pause_min);
  auto now = t0;
  for (int i = 0; i < 20; ++i) {
    const auto end = now + pause;
    now = end + 1ms;  // a takeover soon after the pause ended
    const auto next = timers::next_pause(pause, end, now);
    EXPECT_EQ(next, std::min<clock_type::duration>(2 * pause, timers::k_pause_max)) << i;
    pause = next;
  }
  EXPECT_EQ(pause, timers::k_pause_max);
  EXPECT_EQ(timers::next_pause(pause, now + pause, now + pause + timers::k_pause_reset),
            timers::k_pause_min);
  // No pause yet, and the clock's start less than k_pause_reset ago (a machine just booted):
  // the first pause is still k_pause_min, not twice nothing.
  EXPECT_EQ(timers::next_pause({}, clock_type::time_point{}, clock_type::time_point{} + 1ms),
            timers::k_pause_min);
}

// Timers with deadlines spread over a few milliseconds, cancelled from another thread while
// the timer thread fires them and workers run them: each runs if and only if its cancel()
// returned false, and each callable is released once.
TEST(TimersStress, CancelRacesFire) {
  std::atomic<int> released{0};
  spool::pool pool{pool_config(2)};
  const int n = stress_iterations(2000);
  std::vector<std::atomic<int>> ran(n);
  std::vector<spool::timer> ts;
  ts.reserve(n);
  for (int i = 0; i < n; ++i) {
    ts.push_back(pool.post_after(std::chrono::microseconds(i % 2000),
                                 [&ran, i, c = release_counter(released)] { ran[i]++; }));
  }
  std::vector<char> won(n);
  std::thread canceller([&] {
    for (int i = n - 1; i >= 0; --i) won[i] = ts[i].cancel();
  });
  canceller.join();
  pool.shutdown(spool::shutdown_mode::drain);
  for (int i = 0; i < n; ++i) EXPECT_EQ(ran[i].load(), won[i] ? 0 : 1) << "timer " << i;
  EXPECT_EQ(released.load(), n);
}

// A drain that begins while workers watch and fire timers due around it: every timer either
// runs once or is counted as dropped, never both, never neither; each callable is released
// once. With a bound past every deadline, none is dropped: the drain waits for the timers a
// watcher took out of the heap as well as for those still in it.
TEST(TimersStress, DrainRacesWatchers) {
  for (int i = 0; i < stress_iterations(100); ++i) {
    for (const bool keep_all : {false, true}) {
      std::atomic<int> released{0};
      std::atomic<int> runs{0};
      constexpr int n = 40;
      std::size_t dropped = 0;
      {
        spool::config cfg = pool_config(2);
        cfg.spin_rounds = 0;
        cfg.drain_timers_within = keep_all ? 1min : 1ms;
        spool::pool pool{cfg};
        for (int k = 0; k < n; ++k) {
          (void)pool.post_after(std::chrono::microseconds(50 * (k % 40)),
                                [&, c = release_counter(released)] { runs.fetch_add(1); });
        }
        run_on_a_worker(pool);  // a worker parks watching the earliest
        dropped = pool.shutdown(spool::shutdown_mode::drain);
      }
      EXPECT_EQ(static_cast<std::size_t>(runs.load()) + dropped, static_cast<std::size_t>(n));
      if (keep_all) {
        EXPECT_EQ(dropped, 0u);
      }
      EXPECT_EQ(released.load(), n);
    }
  }
}

// Periodic timers cancelled while they run, come due and reschedule: every cancel() of a live
// periodic timer returns true, and each callable is released exactly once (and only after its
// last run: ASan would report a call of a destroyed callable).
TEST(TimersStress, CancelRacesPeriodicRuns) {
  std::atomic<int> released{0};
  spool::pool pool{pool_config(2)};
  const int n = stress_iterations(200);
  std::latch each_ran{n};
  std::vector<std::atomic<int>> runs(n);
  std::vector<spool::timer> ts;
  ts.reserve(n);
  for (int i = 0; i < n; ++i) {
    ts.push_back(pool.post_every(std::chrono::microseconds(50 + i % 150),
                                 [&runs, &each_ran, i, c = release_counter(released)] {
                                   if (runs[i].fetch_add(1) == 0) each_ran.count_down();
                                 }));
  }
  each_ran.wait();
  for (int i = 0; i < n; ++i) EXPECT_TRUE(ts[i].cancel()) << "timer " << i;
  // Joins the timer thread too, which may hold an entry between the heap and its fire().
  pool.shutdown(spool::shutdown_mode::drain);
  EXPECT_EQ(released.load(), n);
  for (int i = 0; i < n; ++i) {
    EXPECT_FALSE(ts[i].active());
    EXPECT_GE(runs[i].load(), 1);
  }
}

}  // namespace
