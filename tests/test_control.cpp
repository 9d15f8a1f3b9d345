// Worker hooks, run-time control (resize, pause/resume, wait_idle_for) and the process-wide
// pool. Every wait is on a latch, a future or a condition the hooks and scale events signal;
// nothing asserts a duration. wait_idle_for with a short timeout is used only where its answer
// is decided by state (a paused pool with queued work cannot become idle).
#include <gtest/gtest.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <latch>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using namespace std::chrono_literals;
using spool::errc;
using spool::scale_event;
using spool_test::error_code_of;
using spool_test::gate;

// A number for the calling thread, never reused (unlike std::thread::id, which a new thread
// may inherit from a joined one).
int thread_token() {
  static std::atomic<int> next{0};
  thread_local const int token = next.fetch_add(1);
  return token;
}

// What the worker hooks saw, in order: which index, on which thread, and (for starts)
// whether the thread already counted as that worker.
class hook_log {
 public:
  struct entry {
    unsigned index;
    int thread;        // thread_token()
    int worker_index;  // this_worker_index() inside the hook
  };
  void started(unsigned i) { add(starts_, i); }
  void stopped(unsigned i) { add(stops_, i); }
  void install(spool::config& cfg) {
    cfg.on_worker_start = [this](unsigned i) { started(i); };
    cfg.on_worker_stop = [this](unsigned i) { stopped(i); };
  }
  void wait_for(std::size_t n_starts, std::size_t n_stops) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return starts_.size() >= n_starts && stops_.size() >= n_stops; });
  }
  std::vector<entry> starts() {
    std::lock_guard lock(mu_);
    return starts_;
  }
  std::vector<entry> stops() {
    std::lock_guard lock(mu_);
    return stops_;
  }

 private:
  void add(std::vector<entry>& v, unsigned i) {
    {
      std::lock_guard lock(mu_);
      v.push_back({i, thread_token(), spool::this_worker_index()});
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<entry> starts_;
  std::vector<entry> stops_;
};

// Each start matches exactly one stop on the same thread with the same index.
void expect_paired(const std::vector<hook_log::entry>& starts,
                   const std::vector<hook_log::entry>& stops) {
  ASSERT_EQ(starts.size(), stops.size());
  std::set<int> threads;
  for (const auto& s : starts) {
    EXPECT_TRUE(threads.insert(s.thread).second) << "a thread started twice";
    EXPECT_EQ(s.worker_index, static_cast<int>(s.index)) << "start hook not on the worker";
    const auto n = std::count_if(stops.begin(), stops.end(), [&](const hook_log::entry& e) {
      return e.thread == s.thread && e.index == s.index;
    });
    EXPECT_EQ(n, 1) << "worker " << s.index;
  }
  for (const auto& e : stops) EXPECT_EQ(e.worker_index, -1) << "stop hook ran as a worker";
}

// Records scale events; a test waits for a count of them.
class scale_log {
 public:
  void install(spool::config& cfg) {
    cfg.on_scale = [this](const scale_event& e) {
      {
        std::lock_guard lock(mu_);
        events_.push_back(e);
      }
      cv_.notify_all();
    };
  }
  std::size_t count(scale_event::kind what, scale_event::cause why) {
    std::lock_guard lock(mu_);
    return count_locked(what, why);
  }
  void wait_for(scale_event::kind what, scale_event::cause why, std::size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return count_locked(what, why) >= n; });
  }

 private:
  std::size_t count_locked(scale_event::kind what, scale_event::cause why) {
    return static_cast<std::size_t>(std::count_if(
        events_.begin(), events_.end(), [&](auto& e) { return e.what == what && e.why == why; }));
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<scale_event> events_;
};

// ---- worker hooks ----

TEST(WorkerHooks, RunOnEachWorkerThreadOnceBeforeAndAfterItsTasks) {
  constexpr unsigned k_threads = 3;
  hook_log hooks;
  std::mutex mu;
  std::map<int, int> task_threads;  // thread_token() -> this_worker_index() in the task
  {
    spool::config cfg = spool_test::pool_config(k_threads);
    hooks.install(cfg);
    spool::pool pool{cfg};
    // One task per worker at once (the barrier holds each until all are running), so every
    // worker runs one.
    std::barrier all(k_threads);
    for (unsigned i = 0; i < k_threads; ++i) {
      pool.post([&] {
        {
          std::lock_guard lock(mu);
          task_threads[thread_token()] = spool::this_worker_index();
        }
        all.arrive_and_wait();
      });
    }
    pool.wait_idle();
    // Every task ran on a thread whose start hook had already run, under the same index.
    const auto starts = hooks.starts();
    ASSERT_EQ(starts.size(), k_threads);
    ASSERT_EQ(task_threads.size(), k_threads);
    for (const auto& [thread, index] : task_threads) {
      const auto it = std::find_if(starts.begin(), starts.end(),
                                   [&](const hook_log::entry& e) { return e.thread == thread; });
      ASSERT_NE(it, starts.end()) << "a task ran on a thread with no start hook";
      EXPECT_EQ(static_cast<int>(it->index), index);
    }
    EXPECT_TRUE(hooks.stops().empty());
  }
  expect_paired(hooks.starts(), hooks.stops());
}

TEST(WorkerHooks, FollowElasticGrowthAndRetirement) {
  hook_log hooks;
  scale_log scale;
  std::size_t started = 0;
  {
    spool::config cfg;
    cfg.min_threads = 1;
    cfg.max_threads = 3;
    cfg.keep_alive = 1ms;
    hooks.install(cfg);
    scale.install(cfg);
    spool::pool pool{cfg};
    for (int round = 0; round < stress_iterations(3); ++round) {
      // A task that blocks inside a blocking_region makes the pool start another thread at
      // once; that thread retires after keep_alive once the task is done.
      std::latch blocked(1);
      gate release;
      pool.post([&] {
        spool::blocking_region region;
        blocked.count_down();
        release.wait();
      });
      blocked.wait();
      scale.wait_for(scale_event::kind::started, scale_event::cause::blocking, round + 1);
      release.open();
      pool.wait_idle();  // the task has left the gate before the next round makes a new one
      scale.wait_for(scale_event::kind::retired, scale_event::cause::idle, round + 1);
    }
    started = pool.statistics().threads_started;
  }
  // Counted once the pool is gone: while a round's task blocks, the idle extra thread may
  // retire and the monitor start another for the load, whose start hook may not have run yet
  // when a count is taken inside. Every thread started (the scale events of every cause)
  // ran its start hook, and its stop hook by the pool's end.
  std::size_t started_events = 0;
  for (auto why :
       {scale_event::cause::initial, scale_event::cause::blocking, scale_event::cause::load}) {
    started_events += scale.count(scale_event::kind::started, why);
  }
  EXPECT_GE(started_events, started);
  EXPECT_EQ(hooks.starts().size(), started_events);
  expect_paired(hooks.starts(), hooks.stops());
  EXPECT_GE(started, 2u);
}

TEST(WorkerHooks, ExceptionsAreReportedAndIgnored) {
  spool::config cfg = spool_test::pool_config(2);
  std::atomic<int> starts{0};
  cfg.on_worker_start = [&](unsigned) {
    starts.fetch_add(1);
    throw std::runtime_error("start hook");
  };
  cfg.on_worker_stop = [](unsigned) { throw 42; };
  {
    spool::pool pool{cfg};
    EXPECT_EQ(pool.submit([] { return 7; }).get(), 7);
  }
  EXPECT_EQ(starts.load(), 2);
}

TEST(WorkerHooks, StopHookSubmissionsAfterShutdownAreRefusedNotLost) {
  // In on_worker_stop the thread is no longer a worker: at shutdown its submission is refused
  // (errc::shut_down) instead of landing in a deque nobody drains.
  std::atomic<int> refused{0};
  std::atomic<int> ran{0};
  spool::pool* self = nullptr;
  spool::config cfg = spool_test::pool_config(2);
  cfg.on_worker_stop = [&](unsigned) {
    if (self->try_post([&] { ran.fetch_add(1); }) == errc::shut_down) refused.fetch_add(1);
  };
  {
    spool::pool pool{cfg};
    self = &pool;
    pool.shutdown();
  }
  EXPECT_EQ(refused.load(), 2);
  EXPECT_EQ(ran.load(), 0);
}

// ---- resize ----

TEST(Resize, RejectsBadBoundsAndKeepsTheOldOnes) {
  spool::config cfg = spool_test::pool_config(2);
  cfg.thread_capacity = 4;
  spool::pool pool{cfg};
  EXPECT_EQ(error_code_of([&] { pool.resize(0, 2); }), errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { pool.resize(3, 2); }), errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { pool.resize(1, 5); }), errc::invalid_argument);
  EXPECT_EQ(pool.thread_count(), 2u);
  EXPECT_EQ(pool.submit([] { return 1; }).get(), 1);

  spool::config bad = spool_test::pool_config(4);
  bad.thread_capacity = 3;  // below max_threads
  EXPECT_EQ(error_code_of([&] { spool::pool p{bad}; }), errc::invalid_argument);
}

TEST(Resize, RaisingMinStartsThreadsAtOnce) {
  scale_log scale;
  spool::config cfg = spool_test::pool_config(1);
  cfg.thread_capacity = 4;
  scale.install(cfg);
  spool::pool pool{cfg};
  pool.resize(3, 4);
  // Threads are counted live before they exist: the count is settled when resize returns.
  EXPECT_EQ(pool.thread_count(), 3u);
  EXPECT_EQ(scale.count(scale_event::kind::started, scale_event::cause::resize), 2u);
  // All three can run at once.
  std::barrier all(3);
  std::vector<spool::future<void>> fs;
  for (int i = 0; i < 3; ++i) fs.push_back(pool.submit([&] { all.arrive_and_wait(); }));
  for (auto& f : fs) f.get();
}

TEST(Resize, ShrinkingRetiresIdleThreadsAndNeverARunningTask) {
  scale_log scale;
  spool::config cfg = spool_test::pool_config(3);
  scale.install(cfg);
  spool::pool pool{cfg};
  // Occupy one worker; the other two are idle (parked without a deadline in a fixed pool).
  std::latch running(1);
  gate release;
  auto busy = pool.submit([&] {
    running.count_down();
    release.wait();
    return spool::this_worker_index();
  });
  running.wait();
  pool.resize(1, 1);
  // The two idle threads retire; the busy one cannot until its task returns.
  scale.wait_for(scale_event::kind::retired, scale_event::cause::resize, 2);
  EXPECT_EQ(pool.thread_count(), 1u);
  EXPECT_FALSE(busy.ready());
  release.open();
  EXPECT_GE(busy.get(), 0);
  // The one thread left runs what comes next.
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) pool.post([&] { ran.fetch_add(1); });
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 100);
  EXPECT_EQ(pool.thread_count(), 1u);
}

TEST(Resize, AFixedPoolBecomesElasticAndBack) {
  scale_log scale;
  spool::config cfg = spool_test::pool_config(1);
  cfg.thread_capacity = 3;
  cfg.keep_alive = 1ms;
  scale.install(cfg);
  spool::pool pool{cfg};
  pool.resize(1, 3);
  // Now elastic: a blocking region grows the pool at once.
  std::latch blocked(1);
  gate release;
  pool.post([&] {
    spool::blocking_region region;
    blocked.count_down();
    release.wait();
  });
  blocked.wait();
  scale.wait_for(scale_event::kind::started, scale_event::cause::blocking, 1);
  EXPECT_EQ(pool.submit([] { return 5; }).get(), 5);  // runs on the grown thread
  release.open();
  pool.wait_idle();
  // Above min, the grown thread retires after keep_alive.
  scale.wait_for(scale_event::kind::retired, scale_event::cause::idle, 1);
  pool.resize(1, 1);
  EXPECT_EQ(pool.submit([] { return 6; }).get(), 6);
}

TEST(Resize, AfterShutdownIsRefused) {
  spool::pool pool{spool_test::pool_config(1)};
  pool.shutdown();
  EXPECT_EQ(error_code_of([&] { pool.resize(1, 1); }), errc::shut_down);
}

TEST(Resize, RacesWithWorkAndItself) {
  // Resizers and a submitter at once: nothing lost, the bounds always valid, no hang.
  const int rounds = stress_iterations(20);
  for (int round = 0; round < rounds; ++round) {
    spool::config cfg = spool_test::pool_config(2);
    cfg.thread_capacity = 4;
    cfg.keep_alive = 0ns;
    std::atomic<int> ran{0};
    {
      spool::pool pool{cfg};
      std::thread resizer([&] {
        for (unsigned i = 0; i < 40; ++i) pool.resize(1 + i % 3, 1 + i % 3 + (i / 3) % 2);
      });
      for (int i = 0; i < 400; ++i) pool.post([&] { ran.fetch_add(1, std::memory_order_relaxed); });
      resizer.join();
      pool.wait_idle();
      const std::size_t live = pool.thread_count();
      EXPECT_GE(live, 1u);
      EXPECT_LE(live, 4u);
    }
    EXPECT_EQ(ran.load(), 400);
  }
}

// ---- pause, resume, wait_idle_for ----

TEST(Pause, NoTaskStartsUntilResume) {
  spool::pool pool{spool_test::pool_config(2)};
  pool.pause();
  EXPECT_TRUE(pool.paused());
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) pool.post([&] { ran.fetch_add(1); });
  // A paused pool with queued work cannot become idle: the wait times out, and nothing ran.
  EXPECT_FALSE(pool.wait_idle_for(20ms));
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(pool.statistics().completed, 0u);
  pool.resume();
  EXPECT_FALSE(pool.paused());
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 50);
}

TEST(Pause, RunningTasksFinishAndSubmissionsAreAccepted) {
  spool::pool pool{spool_test::pool_config(2)};
  std::latch running(1);
  gate release;
  auto first = pool.submit([&] {
    running.count_down();
    release.wait();
    return 1;
  });
  running.wait();
  pool.pause();
  std::atomic<bool> second_ran{false};
  auto second = pool.submit([&] {
    second_ran = true;
    return 2;
  });
  release.open();
  EXPECT_EQ(first.get(), 1);  // the running task finishes while paused
  EXPECT_FALSE(pool.wait_idle_for(10ms));
  EXPECT_FALSE(second_ran.load());
  EXPECT_FALSE(second.ready());
  pool.resume();
  EXPECT_EQ(second.get(), 2);
}

TEST(Pause, WaitIdleOnAPausedPoolWithNothingPendingReturns) {
  spool::pool pool{spool_test::pool_config(2)};
  EXPECT_EQ(pool.submit([] { return 3; }).get(), 3);
  pool.pause();
  pool.pause();  // twice is once
  pool.wait_idle();
  EXPECT_TRUE(pool.wait_idle_for(0ns));
  pool.resume();
  pool.resume();  // resuming a running pool does nothing
  EXPECT_FALSE(pool.paused());
}

TEST(Pause, ShutdownDrainingRunsWhatWasHeld) {
  std::atomic<int> ran{0};
  spool::pool pool{spool_test::pool_config(2)};
  pool.pause();
  for (int i = 0; i < 30; ++i) pool.post([&] { ran.fetch_add(1); });
  EXPECT_EQ(pool.shutdown(spool::shutdown_mode::drain), 0u);
  EXPECT_EQ(ran.load(), 30);
  EXPECT_EQ(error_code_of([&] { pool.pause(); }), errc::shut_down);
}

TEST(Pause, ShutdownDiscardingDropsWhatWasHeld) {
  std::atomic<int> ran{0};
  spool::pool pool{spool_test::pool_config(2)};
  pool.pause();
  std::vector<spool::future<void>> fs;
  for (int i = 0; i < 30; ++i) fs.push_back(pool.submit([&] { ran.fetch_add(1); }));
  // Some workers may hold a task at the gate: those are dropped too, never run.
  EXPECT_EQ(pool.shutdown(spool::shutdown_mode::discard), 30u);
  EXPECT_EQ(ran.load(), 0);
  for (auto& f : fs) EXPECT_THROW(f.get(), spool::task_cancelled);
}

TEST(Pause, DestroyingAPausedPoolDrainsIt) {
  std::atomic<int> ran{0};
  {
    spool::pool pool{spool_test::pool_config(2)};
    pool.pause();
    for (int i = 0; i < 10; ++i) pool.post([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 10);
}

TEST(Pause, HoldsRangeSubmissionsAndTasksSubmittedByTasks) {
  spool::pool pool{spool_test::pool_config(2)};
  std::atomic<int> ran{0};
  std::latch running(1);
  gate release;
  // A running task submits more while the pool is paused: its children wait too.
  pool.post([&] {
    running.count_down();
    release.wait();
    for (int i = 0; i < 8; ++i) pool.post([&] { ran.fetch_add(1); });
  });
  running.wait();
  pool.pause();
  pool.post_n(64, [&](std::size_t) { ran.fetch_add(1); });
  release.open();
  EXPECT_FALSE(pool.wait_idle_for(10ms));
  EXPECT_EQ(ran.load(), 0);
  pool.resume();
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 72);
}

TEST(Pause, ElasticPoolDoesNotGrowForHeldTasks) {
  scale_log scale;
  spool::config cfg;
  cfg.min_threads = 1;
  cfg.max_threads = 4;
  cfg.monitor_min_interval = 100us;
  cfg.monitor_max_interval = 200us;
  scale.install(cfg);
  spool::pool pool{cfg};
  pool.pause();
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) pool.post([&] { ran.fetch_add(1); });
  // Many monitor intervals pass while the wait times out; a held worker is not a stall.
  EXPECT_FALSE(pool.wait_idle_for(20ms));
  EXPECT_EQ(scale.count(scale_event::kind::started, scale_event::cause::load), 0u);
  pool.resume();
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 20);
}

TEST(Pause, ControlCallsFromAWorker) {
  spool::pool pool{spool_test::pool_config(2)};
  auto task = [&] {
    pool.pause();
    pool.resume();
    return error_code_of([&] { (void)pool.wait_idle_for(1ms); });
  };
  // On a worker (the waiter is another thread, which never runs the task itself).
  EXPECT_EQ(spool_test::get_elsewhere(pool.submit(task)), errc::would_deadlock);
  // Waited for by its submitter, which may run it itself: it would wait for itself as well.
  EXPECT_EQ(pool.submit(task).get(), errc::would_deadlock);
}

TEST(Pause, PauseResumeStress) {
  // A toggler pauses and resumes while submitters post, from outside and from tasks.
  const int rounds = stress_iterations(10);
  for (int round = 0; round < rounds; ++round) {
    std::atomic<int> ran{0};
    std::atomic<bool> stop{false};
    {
      spool::pool pool{spool_test::pool_config(3)};
      std::thread toggler([&] {
        while (!stop.load()) {
          pool.pause();
          std::this_thread::yield();
          pool.resume();
        }
      });
      for (int i = 0; i < 300; ++i) {
        pool.post([&] {
          ran.fetch_add(1);
          pool.post([&] { ran.fetch_add(1); });
        });
      }
      stop = true;
      toggler.join();
      if (round % 2 == 0) pool.wait_idle();
    }
    EXPECT_EQ(ran.load(), 600);
  }
}

TEST(WaitIdleFor, ReturnsTrueOnceIdleAndFalseWhileBusy) {
  spool::pool pool{spool_test::pool_config(2)};
  std::latch running(1);
  gate release;
  pool.post([&] {
    running.count_down();
    release.wait();
  });
  running.wait();
  EXPECT_FALSE(pool.wait_idle_for(1ms));  // the task waits for us: the pool cannot be idle
  release.open();
  EXPECT_TRUE(pool.wait_idle_for(std::chrono::hours(1)));
  EXPECT_TRUE(pool.wait_idle_for(std::chrono::nanoseconds::max()));
}

// ---- the process-wide pool ----

TEST(DefaultPool, IsOnePoolSizedToTheCpus) {
  std::vector<spool::pool*> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&seen, i] { seen[i] = &spool::default_pool(); });
  }
  for (auto& t : threads) t.join();
  for (auto* p : seen) EXPECT_EQ(p, &spool::default_pool());
  spool::pool& pool = spool::default_pool();
  EXPECT_EQ(pool.thread_count(), spool::allowed_cpus().size());
  EXPECT_EQ(pool.submit([] { return 11; }).get(), 11);
  pool.wait_idle();
}

// Only exit ends it: close() and every shutdown are refused (the C API says the same).
TEST(DefaultPool, CallsThatWouldEndItAreRefused) {
  spool::pool& pool = spool::default_pool();
  EXPECT_EQ(error_code_of([&] { pool.close(); }), errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { (void)pool.shutdown(); }), errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { (void)pool.shutdown(spool::shutdown_mode::discard); }),
            errc::invalid_argument);
  EXPECT_EQ(error_code_of([&] { (void)pool.shutdown_for(1ms); }), errc::invalid_argument);
  EXPECT_EQ(pool.submit([] { return 3; }).get(), 3);
}

// The lifetime at exit, in a child process of its own (this binary again, running only this
// test, with SPOOL_TEST_DEFAULT_POOL_CHILD set), so that no other test has used the pool first.
// atexit handlers and static destructors run in the reverse order of their registration: a
// handler registered before the pool's first use runs after its shutdown and must find it
// refusing work; one registered after runs before and must find it working.
std::atomic<int> child_early_ok{0};

void child_early() {  // registered after the first use: the pool still runs
  child_early_ok = spool::default_pool().submit([] { return 1; }).get();
}

void child_late() {  // registered before the first use: the pool is shut down, not gone
  const std::error_code ec = spool::default_pool().try_post([] {});
  std::_Exit(child_early_ok.load() == 1 && ec == errc::shut_down ? 0 : 3);
}

TEST(DefaultPool, ShutsDownAtExitAndRefusesWorkAfterwards) {
  if (std::getenv("SPOOL_TEST_DEFAULT_POOL_CHILD") != nullptr) {
    std::atexit(child_late);
    EXPECT_EQ(spool::default_pool().submit([] { return 2; }).get(), 2);
    std::atexit(child_early);
    std::exit(4);  // the handlers decide the status; 4 means child_late never ran
  }
  char exe[] = "/proc/self/exe";
  char filter[] = "--gtest_filter=DefaultPool.ShutsDownAtExitAndRefusesWorkAfterwards";
  char* argv[] = {exe, filter, nullptr};
  std::vector<std::string> env_strings{"SPOOL_TEST_DEFAULT_POOL_CHILD=1"};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, exe, nullptr, nullptr, argv, envp.data()), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
