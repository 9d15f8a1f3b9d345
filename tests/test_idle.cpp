// An idle pool makes no wake-ups: once every worker sleeps, none runs again until work arrives.
// With a timer pending far ahead served by the timer thread it makes exactly two when the timer
// is due (the thread, then a worker); with one that a worker watches, none before it is due.
// The timer thread ("<name>-tmr") is counted with the workers.
// Observed from the kernel's side, per worker thread (/proc/self/task/<tid>): the scheduler
// state and the context-switch counters. This asserts a count of events (zero), not a speed.
#include <gtest/gtest.h>
#include <spool/spool.hpp>

#include "core_testing.hpp"
#include "support.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <sstream>
#include <string>
#include <thread>

namespace {

namespace fs = std::filesystem;
using spool::detail::core_testing;
using spool_test::run_on_a_worker;

struct thread_info {
  char state = '?';
  long switches = 0;   // voluntary + involuntary context switches
  long voluntary = 0;  // of which voluntary: the thread went to sleep
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The pool's workers, found by their thread names ("<prefix>-<index>").
std::map<std::string, thread_info> workers_named(const std::string& prefix) {
  std::map<std::string, thread_info> out;
  for (const auto& entry : fs::directory_iterator("/proc/self/task")) {
    std::string comm = read_file(entry.path() / "comm");
    if (comm.rfind(prefix + "-", 0) != 0) continue;
    thread_info info;
    std::istringstream status(read_file(entry.path() / "status"));
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("State:", 0) == 0) info.state = line[7];
      if (line.find("ctxt_switches:") != std::string::npos) {
        info.switches += std::stol(line.substr(line.find(':') + 1));
      }
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) {
        info.voluntary = std::stol(line.substr(line.find(':') + 1));
      }
    }
    out[entry.path().filename().string()] = info;
  }
  return out;
}

bool all_sleeping(const std::map<std::string, thread_info>& ws, std::size_t expected) {
  if (ws.size() != expected) return false;
  for (const auto& [tid, info] : ws) {
    if (info.state != 'S') return false;
  }
  return true;
}

// Reads the threads named `name` into `threads`; true if all `expected` of them are asleep and
// no timed sleeper is listed, checked before and after the read: a sleeper that gives the role
// up, or a worker that takes it, is running (not asleep) somewhere between the two checks.
// Yields when not, for the caller's polling loop.
bool settled(const spool::detail::core& core, const std::string& name,
             std::map<std::string, thread_info>& threads, std::size_t expected) {
  const bool no_timed_before = !core_testing::timed_sleeper(core);
  threads = workers_named(name);
  const bool ok =
      no_timed_before && all_sleeping(threads, expected) && !core_testing::timed_sleeper(core);
  if (!ok) std::this_thread::yield();
  return ok;
}

// A pool whose workers go straight to sleep (spin_rounds = 0) and defer no wake-up
// (defer_period = 0), so that each wake-up is one voluntary context switch (going back to
// sleep).
spool::config quiet_config(const char* name, unsigned threads) {
  spool::config cfg;
  cfg.threads = threads;
  cfg.name = name;
  cfg.spin_rounds = 0;
  cfg.defer_period = std::chrono::microseconds(0);
  return cfg;
}

// The id (/proc/self/task/<tid>) of the thread whose name is `comm`, or "" if none.
std::string thread_named(const std::string& comm) {
  for (const auto& entry : fs::directory_iterator("/proc/self/task")) {
    if (read_file(entry.path() / "comm") == comm + "\n") return entry.path().filename();
  }
  return {};
}

// True once a worker watches the pending timer, the timer thread backs it up, and every one of
// the `expected` threads sleeps (read into `threads`, as settled()). A worker takes the watch
// when it parks with the timer pending, unless a takeover by the timer thread (a watcher held
// back by a loaded machine) paused the watch (src/timers/README.md); so while all sleep and
// none watches, one more runs a task and parks again.
bool watched_and_settled(spool::pool& pool, const std::string& name, std::size_t expected,
                         std::map<std::string, thread_info>& threads) {
  const auto& core = spool::detail::pool_access::of(pool);
  if (core_testing::timer_watcher(core) < 0) {
    if (settled(core, name, threads, expected)) run_on_a_worker(pool);
    return false;
  }
  return core_testing::timer_thread_backs_up(core) && settled(core, name, threads, expected) &&
         core_testing::timer_watcher(core) >= 0;
}

// Sleeps `interval`, a window in which a wake-up would show, then reads the threads named
// `name` again.
std::map<std::string, thread_info> after_interval(const std::string& name,
                                                  std::chrono::milliseconds interval) {
  std::this_thread::sleep_for(interval);
  return workers_named(name);
}

// Expects that no thread in `now` made a context switch since `then` was read.
void expect_no_switches(const std::map<std::string, thread_info>& then,
                        const std::map<std::string, thread_info>& now, const char* what) {
  for (const auto& [tid, info] : now) {
    const auto was = then.find(tid);
    EXPECT_TRUE(was != then.end() && info.switches == was->second.switches)
        << "thread " << tid << " woke " << what;
  }
}

TEST(Idle, SleepingWorkersStayAsleep) {
  constexpr unsigned threads = 4;
  spool::pool pool{spool::config{.threads = threads, .name = "idletest"}};
  // Give them something to do first, so they go through the whole spin-then-sleep path.
  for (int i = 0; i < 1000; ++i) pool.post([] {});
  pool.wait_idle();

  // Wait until the kernel reports every worker asleep (they spin briefly first) and none of
  // them holds the timed role: a pool crowded by the posts above may have left one sleeper
  // parked with a deadline, which gives the role up at its next period once it finds no
  // outside thread submitting (src/sleep/README.md, "Deferred wake-ups").
  const auto& core = spool::detail::pool_access::of(pool);
  std::map<std::string, thread_info> before;
  while (!settled(core, "idletest", before, threads)) {
  }
  // An interval in which a pool that polled or had a timer would have woken many times.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto after = workers_named("idletest");
  ASSERT_EQ(after.size(), threads);
  for (const auto& [tid, info] : after) {
    EXPECT_EQ(info.state, 'S') << "worker " << tid;
    EXPECT_EQ(info.switches, before[tid].switches) << "worker " << tid << " woke while idle";
  }

  // A pool that never had a timer has no timer thread.
  for (const auto& entry : fs::directory_iterator("/proc/self/task")) {
    EXPECT_NE(read_file(entry.path() / "comm"), "idletest-tmr\n");
  }

  // And the pool still works after sleeping.
  EXPECT_EQ(pool.submit([] { return 7; }).get(), 7);
}

// A timer far ahead: nothing wakes until it is due; then the timer thread wakes once and one
// worker once (to run it), and after that, with no timer pending, nothing wakes again.
TEST(Idle, TimerFarAheadWakesOnceWhenDue) {
  constexpr unsigned threads = 2;
  spool::pool pool{quiet_config("idletmr", threads)};
  // Start the timer thread and run the workers once.
  pool.submit_after(std::chrono::milliseconds(1), [] {}).get();
  pool.wait_idle();
  const auto& core = spool::detail::pool_access::of(pool);
  std::map<std::string, thread_info> before;
  // Every worker asleep before the timer is posted: one that parked while it was pending would
  // watch it (the next test), and this test is about the timer thread.
  while (!settled(core, "idletmr", before, threads + 1)) {
  }

  std::latch fired{1};
  spool::timer t = pool.post_after(std::chrono::milliseconds(1500), [&] { fired.count_down(); });
  while (!settled(core, "idletmr", before, threads + 1)) {
  }
  ASSERT_LT(core_testing::timer_watcher(core), 0) << "a worker watches the timer";
  ASSERT_FALSE(fired.try_wait()) << "the machine was too slow to observe the wait";
  const auto mid = after_interval("idletmr", std::chrono::milliseconds(500));
  ASSERT_FALSE(fired.try_wait()) << "the machine was too slow to observe the wait";
  expect_no_switches(before, mid, "before the timer");

  fired.wait();
  std::map<std::string, thread_info> after;
  while (!settled(core, "idletmr", after, threads + 1)) {
  }
  const std::string timer_tid = thread_named("idletmr-tmr");
  ASSERT_FALSE(timer_tid.empty());
  long worker_wakeups = 0;
  for (const auto& [tid, info] : after) {
    // A wake-up is a sleep ended: counted by the voluntary switch of going back to sleep
    // (a preemption while it runs, on a busy machine, is not a wake-up).
    const long woke = info.voluntary - before[tid].voluntary;
    if (tid == timer_tid) {
      EXPECT_EQ(woke, 1) << "the timer thread wakes once, at the deadline";
    } else {
      worker_wakeups += woke;
    }
  }
  EXPECT_EQ(worker_wakeups, 1) << "one worker wakes to run the timer's task";

  // Nothing pending now: another interval with no wake-up at all.
  expect_no_switches(after, after_interval("idletmr", std::chrono::milliseconds(300)),
                     "with no timer");
}

// A timer far ahead that an idle worker watches (timers/README.md, "A worker watches the
// earliest deadline"): the worker sleeps until the deadline and the timer thread only backs it
// up, past it; nothing wakes before the timer is due, and nothing after it has run.
TEST(Idle, WatchedTimerFarAheadWakesNothingBeforeItIsDue) {
  constexpr unsigned threads = 2;
  spool::pool pool{quiet_config("idlewatch", threads)};
  pool.submit_after(std::chrono::milliseconds(1), [] {}).get();  // starts the timer thread
  pool.wait_idle();

  std::latch fired{1};
  spool::timer t = pool.post_after(std::chrono::milliseconds(1500), [&] { fired.count_down(); });
  // A worker that parks while the timer is pending takes the watch.
  run_on_a_worker(pool);
  const auto& core = spool::detail::pool_access::of(pool);
  std::map<std::string, thread_info> before;
  while (!watched_and_settled(pool, "idlewatch", threads + 1, before) && !fired.try_wait()) {
  }
  ASSERT_FALSE(fired.try_wait()) << "the machine was too slow to observe the wait";
  const auto mid = after_interval("idlewatch", std::chrono::milliseconds(500));
  ASSERT_FALSE(fired.try_wait()) << "the machine was too slow to observe the wait";
  expect_no_switches(before, mid, "before the timer");

  fired.wait();
  // The watch ends with nothing pending, and the thread sleeps without a timeout again.
  std::map<std::string, thread_info> after;
  while (core_testing::timer_watcher(core) >= 0 || core_testing::timer_thread_backs_up(core) ||
         !settled(core, "idlewatch", after, threads + 1)) {
    std::this_thread::yield();
  }
  expect_no_switches(after, after_interval("idlewatch", std::chrono::milliseconds(300)),
                     "with no timer");
}

// A pool whose one worker watches a timer far ahead: each task posted from outside wakes that
// worker, which keeps the watch while it runs the task and parks with it again; the timer
// thread, waiting as its backstop past the timer's deadline, is never woken.
TEST(Idle, SubmissionsToAWatcherWakeNoTimerThread) {
  spool::pool pool{quiet_config("idlewoke", 1)};
  spool::timer t = pool.post_after(std::chrono::hours(1), [] {});
  run_on_a_worker(pool);
  const auto& core = spool::detail::pool_access::of(pool);
  std::map<std::string, thread_info> before;
  while (!watched_and_settled(pool, "idlewoke", 2, before)) {
  }
  const std::string timer_tid = thread_named("idlewoke-tmr");
  ASSERT_FALSE(timer_tid.empty());
  for (int i = 0; i < 200; ++i) {
    std::latch ran{1};
    pool.post([&] { ran.count_down(); });
    ran.wait();
  }
  auto after = workers_named("idlewoke");
  EXPECT_EQ(after[timer_tid].voluntary, before[timer_tid].voluntary)
      << "the timer thread woke for a submission";
  EXPECT_EQ(core_testing::timer_watcher(core), 0);
  EXPECT_TRUE(t.cancel());
}

// An elastic pool at rest: its min_threads workers and its monitor all sleep, and none of them
// wakes (workers at min_threads have no keep_alive timer; the monitor has no tick while idle).
TEST(Idle, ElasticPoolAndItsMonitorStayAsleep) {
  spool::config cfg;
  cfg.min_threads = 2;
  cfg.max_threads = 8;
  cfg.name = "idleela";
  spool::pool pool{cfg};
  for (int i = 0; i < 1000; ++i) pool.post([] {});
  pool.wait_idle();

  constexpr std::size_t expected = 3;  // idleela-0, idleela-1, idleela-mon
  // The monitor checks once more after the last task before it sleeps for good; wait for that.
  const auto& core = spool::detail::pool_access::of(pool);
  while (!core_testing::monitor_sleeping(core)) std::this_thread::yield();
  std::map<std::string, thread_info> before;
  while (!settled(core, "idleela", before, expected)) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto after = workers_named("idleela");
  ASSERT_EQ(after.size(), expected);
  for (const auto& [tid, info] : after) {
    EXPECT_EQ(info.state, 'S') << "thread " << tid;
    EXPECT_EQ(info.switches, before[tid].switches) << "thread " << tid << " woke while idle";
  }
  EXPECT_EQ(pool.submit([] { return 7; }).get(), 7);
}

}  // namespace
