// Deferred wake-ups (src/sleep/README.md): while an outside thread submits and
// the awake workers fill the CPUs, a submission wakes nobody, and one sleeper with the timed
// role watches the deferred work. These tests make a pool crowded on any machine by telling it
// that it has 2 CPUs, then check the two ways deferred work gets run: the timed sleeper takes
// it when the only awake worker is stuck in a task, and an outside thread that goes to sleep in
// one of spool's waits hands it over at once. They assert what ran and the pool's own counts of
// deferrals and rescues, never how long anything took.
#include <gtest/gtest.h>
#include <spool/spool.hpp>
#include <spool/task_group.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <latch>
#include <thread>
#include <utility>

#include "core_testing.hpp"
#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using spool::detail::core;
using spool::detail::core_testing;
using spool::detail::pool_access;
using namespace std::chrono_literals;

// Pools created while this lives count `n` CPUs, whatever the machine has.
class cpus_override {
 public:
  explicit cpus_override(std::uint32_t n) { spool::detail::scheduling_testing::set_cpus(n); }
  ~cpus_override() { spool::detail::scheduling_testing::set_cpus(0); }
  cpus_override(const cpus_override&) = delete;
  cpus_override& operator=(const cpus_override&) = delete;
};

spool::config crowding_config(std::chrono::microseconds period) {
  spool::config cfg;
  cfg.threads = 2;
  cfg.spin_rounds = 0;  // an idle worker parks at once, so the steps below are few
  cfg.defer_period = period;
  return cfg;
}

// Returns once one worker runs a task that waits at `release`.
void hold_one_worker(spool::pool& pool, const spool_test::gate& release) {
  std::latch started(1);
  pool.post([&] {
    started.count_down();
    release.wait();
  });
  started.wait();
}

// Brings a 2-worker pool on "2 CPUs" to the crowded state: one worker runs a task that waits at
// `release`, and the other has run a task since and parked holding the timed role (an outside
// thread, this one, has submitted, and the one awake worker plus that thread fill the CPUs).
// Both workers are parked (without the role: nothing was submitted yet) before the first post,
// which wakes one of them; the other stays parked, untimed, until the second post finds no
// timed sleeper to defer to and wakes it. With a short period, the role lapses after two
// periods without a submission, possibly before this thread sees it: then another task sends
// the worker round again. (With a long period nothing changes once it is parked.)
void crowd(spool::pool& pool, const spool_test::gate& release) {
  core& c = pool_access::of(pool);
  while (core_testing::sleepers(c) != 2) std::this_thread::yield();
  ASSERT_FALSE(core_testing::timed_sleeper(c));
  hold_one_worker(pool, release);
  for (;;) {
    // Only the other worker can run this one; it parks after it.
    std::latch ran(1);
    pool.post([&] { ran.count_down(); });
    ran.wait();
    for (;;) {
      if (core_testing::timed_sleeper(c)) return;
      // Counted as a sleeper without the role (the parker sets the role before the count):
      // parked, role lapsed.
      if (core_testing::sleepers(c) == 1 && !core_testing::timed_sleeper(c)) break;
      std::this_thread::yield();
    }
  }
}

// The deadlock a plain cap on awake workers would have: the only awake worker runs a task that
// waits for a later task. That task's wake-up is deferred; nothing but the timed sleeper's
// period can run it, since this thread then waits on a std::latch, not on spool. If the role
// lapsed between crowd() and the post (this thread was descheduled for two periods), the post
// woke the worker instead; the scenario is then run again on a fresh pool.
TEST(Deferral, TimedSleeperRunsWorkQueuedBehindAStuckWorker) {
  cpus_override cpus(2);
  bool deferred_once = false;
  for (int attempt = 0; attempt < 20 && !deferred_once; ++attempt) {
    spool::pool pool(crowding_config(50ms));
    const core& c = pool_access::of(pool);
    spool_test::gate release;
    crowd(pool, release);
    const std::uint64_t deferred = core_testing::deferred_wakes(c);
    std::latch done(1);
    pool.post([&] {
      release.open();
      done.count_down();
    });
    deferred_once = core_testing::deferred_wakes(c) > deferred;
    done.wait();
    if (deferred_once) {
      EXPECT_GE(core_testing::rescues(c), 1u);
    }
    pool.wait_idle();
  }
  EXPECT_TRUE(deferred_once) << "no post was deferred in 20 attempts";
}

// An outside thread that sleeps in a spool wait gives its core up, so work deferred on its
// account is handed to a sleeper then. The period is an hour: if the hand-over did not happen,
// these waits would not return (and the watchdog would fail the test). `submit_and_wait`
// submits its task argument, calls its check argument (the submission must have deferred its
// wake-up), and waits in spool.
template <class SubmitAndWait>
void check_hand_over(SubmitAndWait submit_and_wait) {
  cpus_override cpus(2);
  spool::pool pool(crowding_config(std::chrono::hours(1)));
  const core& c = pool_access::of(pool);
  spool_test::gate release;
  crowd(pool, release);
  const std::uint64_t deferred = core_testing::deferred_wakes(c);
  std::atomic<bool> ran{false};
  submit_and_wait(
      pool,
      [&] {
        ran = true;
        release.open();
      },
      [&] { EXPECT_GT(core_testing::deferred_wakes(c), deferred); });
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(core_testing::rescues(c), 0u);
}

TEST(Deferral, FutureWaitHandsDeferredWorkOver) {
  check_hand_over([](spool::pool& pool, auto task, auto check) {
    auto f = pool.submit(task);
    check();
    f.get();
  });
}

TEST(Deferral, WaitIdleHandsDeferredWorkOver) {
  check_hand_over([](spool::pool& pool, auto task, auto check) {
    pool.post(task);
    check();
    pool.wait_idle();
  });
}

TEST(Deferral, GroupWaitHandsDeferredWorkOver) {
  check_hand_over([](spool::pool& pool, auto task, auto check) {
    spool::task_group g(pool);
    g.run(task);
    check();
    g.wait();
  });
}

// An outside thread that submits a task and waits for it with get(), one trip after another,
// runs each task itself (core::run_own_task) unless a worker took it first. Once it has taken
// one back, its submissions defer their wake-ups to a timed sleeper instead of waking a worker
// that would find nothing, or take the task and make the thread wait for a hand-off. Here the
// workers park as soon as they are idle (spin_rounds 0): no worker is awake, so the pool is
// never crowded, and without this rule no submission would defer at all.
TEST(Deferral, OwnerThatTakesItsTasksBackDefers) {
  cpus_override cpus(2);
  spool::pool pool(crowding_config(std::chrono::hours(1)));
  const core& c = pool_access::of(pool);
  const auto me = std::this_thread::get_id();
  int value = 0;
  auto trip = [&] {
    ++value;
    auto f = pool.submit([v = value] { return std::pair(v, std::this_thread::get_id()); });
    const auto [got, ran_on] = f.get();
    EXPECT_EQ(got, value);
    return ran_on;
  };
  // Until this thread has run its task, and a parked worker holds the timed role (a woken
  // worker may take the first tasks before this thread's get() does; one that parks after
  // this thread took a task back takes the role).
  while (!(trip() == me && core_testing::takes_back(c) && core_testing::timed_sleeper(c) &&
           core_testing::sleepers(c) == 2)) {
  }
  const std::uint64_t deferred = core_testing::deferred_wakes(c);
  for (int i = 0; i < 1000; ++i) trip();
  EXPECT_GT(core_testing::deferred_wakes(c), deferred);
}

// Makes submit().get() trips from this thread until it has run its own task and a parked
// worker holds the timed role (with `both_parked`, both workers listed): its next submission
// defers. A woken worker may take the first tasks before this thread's get() does.
void take_back_until_deferring(spool::pool& pool, bool both_parked) {
  const core& c = pool_access::of(pool);
  const auto me = std::this_thread::get_id();
  auto trip = [&] { return pool.submit([] { return std::this_thread::get_id(); }).get(); };
  while (!(trip() == me && core_testing::takes_back(c) && core_testing::timed_sleeper(c) &&
           (!both_parked || core_testing::sleepers(c) == 2))) {
  }
}

// The same thread, taking its tasks back, then posts a task it does not wait for in spool: its
// wake-up is deferred all the same (the thread's next submission is what tells), and the timed
// sleeper runs it at its period's end. The submission after that one no longer counts the
// thread as taking its tasks back. If the role lapsed before the post (this thread was
// descheduled for a whole period), the post woke a worker instead; the scenario is then run
// again on a fresh pool.
TEST(Deferral, UnwaitedTaskOfAnOwnerThatTakesTasksBackStillRuns) {
  cpus_override cpus(2);
  const auto me = std::this_thread::get_id();
  bool deferred_once = false;
  for (int attempt = 0; attempt < 20 && !deferred_once; ++attempt) {
    spool::pool pool(crowding_config(20ms));
    const core& c = pool_access::of(pool);
    take_back_until_deferring(pool, /*both_parked=*/true);
    const std::uint64_t deferred = core_testing::deferred_wakes(c);
    std::latch done(1);
    std::thread::id ran_on;
    pool.post([&] {
      ran_on = std::this_thread::get_id();
      done.count_down();
    });
    deferred_once = core_testing::deferred_wakes(c) > deferred;
    done.wait();
    EXPECT_NE(ran_on, me);
    EXPECT_TRUE(core_testing::takes_back(c));  // still: the post's own submission decides nothing
    std::latch again(1);
    pool.post([&] { again.count_down(); });
    EXPECT_FALSE(core_testing::takes_back(c));
    again.wait();
    pool.wait_idle();
  }
  EXPECT_TRUE(deferred_once) << "no post was deferred in 20 attempts";
}

// Two outside threads take their tasks back; one then posts a task it does not wait for in
// spool, while the other goes on with its trips, which keep a timed sleeper listed period
// after period. The post must run while the trips go on: a period that ends with work queued
// and no worker awake takes it (sleep_control::sleep_timed) rather than defer it again, since
// the other thread takes back only its own tasks. (Here the other thread's trips are not all
// taken back, and one that a worker runs also wakes workers; the rule is what bounds the wait
// when they all are.) If the post was not deferred (no role listed just then), it is run again
// on a fresh pool.
TEST(Deferral, AnotherOwnersTripsDoNotHoldBackAPost) {
  cpus_override cpus(2);
  bool deferred_once = false;
  for (int attempt = 0; attempt < 20 && !deferred_once; ++attempt) {
    spool::pool pool(crowding_config(1ms));
    const core& c = pool_access::of(pool);
    std::atomic<bool> stop{false};
    std::thread other([&] {
      while (!stop.load(std::memory_order_relaxed)) pool.submit([] {}).get();
    });
    take_back_until_deferring(pool, /*both_parked=*/false);
    const std::uint64_t deferred = core_testing::deferred_wakes(c);
    std::latch done(1);
    pool.post([&] { done.count_down(); });
    deferred_once = core_testing::deferred_wakes(c) > deferred;
    done.wait();
    stop = true;
    other.join();
  }
  EXPECT_TRUE(deferred_once) << "no post was deferred in 20 attempts";
}

// A pool that must not defer, made crowded as crowd() does and then given 100 tasks one at a
// time, each waited for on a std::latch: only the second worker can run them, and it must be
// woken each time (a deferred wake-up would leave the task to a timed sleeper, if any).
void expect_never_defers(const spool::config& cfg) {
  spool::pool pool(cfg);
  const core& c = pool_access::of(pool);
  spool_test::gate release;
  hold_one_worker(pool, release);
  for (int i = 0; i < 100; ++i) {
    std::latch done(1);
    pool.post([&] { done.count_down(); });
    done.wait();
  }
  EXPECT_FALSE(core_testing::timed_sleeper(c));
  release.open();
  pool.wait_idle();
  EXPECT_EQ(core_testing::deferred_wakes(c), 0u);
  EXPECT_EQ(core_testing::rescues(c), 0u);
}

TEST(Deferral, ZeroPeriodTurnsItOff) {
  cpus_override cpus(2);
  expect_never_defers(crowding_config(0us));
}

// A pool with more threads than CPUs was sized for blocking tasks: it never defers. (With an
// hour's period, a deferred task here would also hang the test.)
TEST(Deferral, MoreThreadsThanCpusNeverDefer) {
  cpus_override cpus(2);
  spool::config cfg = crowding_config(std::chrono::hours(1));
  cfg.threads = 3;
  expect_never_defers(cfg);
}

TEST(Deferral, NegativePeriodIsRefused) {
  spool::config cfg;
  cfg.defer_period = -1us;
  EXPECT_EQ(spool_test::error_code_of([&] { spool::pool p{cfg}; }), spool::errc::invalid_argument);
}

// Once the outside thread stops submitting, the timed sleeper gives the role up at its next
// period: an idle pool keeps no sleeper with a deadline (test_idle checks that it then makes
// no wake-ups at all).
TEST(Deferral, TimedRoleEndsWhenSubmissionsStop) {
  cpus_override cpus(2);
  spool::pool pool(crowding_config(1ms));
  const core& c = pool_access::of(pool);
  spool_test::gate release;
  crowd(pool, release);
  release.open();
  pool.wait_idle();
  while (core_testing::timed_sleeper(c)) std::this_thread::yield();
  EXPECT_EQ(pool.submit([] { return 3; }).get(), 3);
}

// Stress: in a crowded pool, chains of tasks where each waits for the next one to start, mixed
// with bursts of short tasks (which make extra workers go back to sleep with work queued, see
// sleep_control::retreat), and only std::latch waits outside. Every task must run in every round; a
// deferred task that nobody watched would hang the round.
TEST(Deferral, BlockingChainsAndBurstsAlwaysFinish) {
  cpus_override cpus(3);  // no more threads than CPUs (else no deferral); two awake crowd it
  spool::config cfg;
  cfg.threads = 3;
  cfg.defer_period = 200us;
  spool::pool pool(cfg);
  constexpr int chain = 3;  // as many as workers: each link holds one while it waits
  constexpr int burst = 200;
  const int rounds = stress_iterations(300);
  std::atomic<int> ran{0};
  for (int r = 0; r < rounds; ++r) {
    std::array<std::atomic<bool>, chain> started{};
    std::latch done(chain + burst);
    for (int i = 0; i < chain; ++i) {
      pool.post([&, i] {
        started[i].store(true);
        started[i].notify_all();
        if (i + 1 < chain) started[i + 1].wait(false);
        ran.fetch_add(1, std::memory_order_relaxed);
        done.count_down();
      });
      for (int j = 0; j < burst / chain; ++j) {
        pool.post([&] {
          ran.fetch_add(1, std::memory_order_relaxed);
          done.count_down();
        });
      }
    }
    for (int j = chain * (burst / chain); j < burst; ++j) {
      pool.post([&] {
        ran.fetch_add(1, std::memory_order_relaxed);
        done.count_down();
      });
    }
    done.wait();
  }
  EXPECT_EQ(ran.load(), rounds * (chain + burst));
  pool.wait_idle();
}

}  // namespace
