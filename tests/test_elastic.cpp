// Elastic sizing: threads grow between min_threads and max_threads when tasks block (with or
// without the blocking hint), shrink back after keep_alive, are joined, and report every change.
// Every wait here is on a latch or on a condition the pool's scale events signal; nothing
// asserts a duration.
#include <gtest/gtest.h>

#include <spool/spool.h>
#include <spool/spool.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <latch>
#include <mutex>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using namespace std::chrono_literals;
using spool::scale_event;

// Records scale events and lets a test wait for a number of live threads. Callbacks from
// different threads may arrive out of order, so the count is started minus retired, not the
// last event's threads_live.
class scale_log {
 public:
  void record(const scale_event& e) {
    {
      std::lock_guard lock(mu_);
      events_.push_back(e);
      live_ += e.what == scale_event::kind::started ? 1 : -1;
    }
    cv_.notify_all();
  }
  void wait_for_live(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return live_ == n; });
  }
  std::vector<scale_event> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::size_t count(scale_event::kind what, scale_event::cause why) {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& e : events_) n += e.what == what && e.why == why;
    return n;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<scale_event> events_;
  int live_ = 0;
};

spool::config elastic(unsigned lo, unsigned hi, scale_log& log,
                      std::chrono::nanoseconds keep_alive = 20ms) {
  spool::config cfg;
  cfg.min_threads = lo;
  cfg.max_threads = hi;
  cfg.keep_alive = keep_alive;
  cfg.name = "elastic";
  cfg.on_scale = [&log](const scale_event& e) { log.record(e); };
  return cfg;
}

std::size_t process_threads() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST(Elastic, RejectsBadBounds) {
  spool::config cfg;
  cfg.min_threads = 4;
  cfg.max_threads = 2;
  EXPECT_EQ(spool_test::error_code_of([&] { spool::pool p{cfg}; }), spool::errc::invalid_argument);
  cfg.min_threads = 1;
  cfg.max_threads = 2;
  cfg.monitor_min_interval = 10ms;
  cfg.monitor_max_interval = 1ms;
  EXPECT_EQ(spool_test::error_code_of([&] { spool::pool p{cfg}; }), spool::errc::invalid_argument);
}

TEST(Elastic, FixedPoolStartsItsThreadsOnly) {
  scale_log log;
  spool::config cfg;
  cfg.threads = 3;
  cfg.on_scale = [&log](const scale_event& e) { log.record(e); };
  spool::pool pool{cfg};
  EXPECT_EQ(pool.thread_count(), 3u);
  EXPECT_EQ(log.count(scale_event::kind::started, scale_event::cause::initial), 3u);
  const spool::stats s = pool.statistics();
  EXPECT_EQ(s.threads_started, 3u);
  EXPECT_EQ(s.threads_live, 3u);
  pool.shutdown();
  EXPECT_EQ(log.count(scale_event::kind::retired, scale_event::cause::shutdown), 3u);
  EXPECT_EQ(pool.statistics().threads_live, 0u);
}

// The test: min 2, max 16, 16 tasks that each block until released run all at once;
// after release and keep_alive the pool is back at 2 threads, and the others were joined.
void sixteen_blocked_tasks(bool hint) {
  const std::size_t threads_before = process_threads();
  scale_log log;
  {
    spool::pool pool{elastic(2, 16, log)};
    log.wait_for_live(2);
    std::latch all_running(16);
    std::latch release(1);
    for (int i = 0; i < 16; ++i) {
      pool.post([&, hint] {
        if (hint) {
          spool::blocking_region blocking;
          all_running.count_down();
          release.wait();
        } else {
          all_running.count_down();
          release.wait();
        }
      });
    }
    all_running.wait();  // returns only if 16 tasks run at the same time
    // A thread started early may have gone idle and retired before the last task arrived, so
    // the counts are related exactly but not fixed.
    spool::stats s = pool.statistics();
    EXPECT_EQ(s.threads_live, 16u);
    EXPECT_EQ(s.threads_busy, 16u);
    EXPECT_EQ(s.threads_started - s.threads_retired, 16u);
    EXPECT_EQ(s.grown_for_blocking + s.grown_for_load + 2, s.threads_started);
    if (hint) {
      EXPECT_EQ(s.threads_blocked, 16u);
      EXPECT_GE(s.grown_for_blocking, 1u);
    } else {
      EXPECT_EQ(s.grown_for_blocking, 0u);
      EXPECT_GE(s.grown_for_load, 14u);
    }
    release.count_down();
    pool.wait_idle();

    log.wait_for_live(2);  // keep_alive passed for the extra threads
    s = pool.statistics();
    EXPECT_EQ(s.threads_live, 2u);
    EXPECT_EQ(s.threads_retired, s.threads_started - 2);
    EXPECT_EQ(s.threads_blocked, 0u);
    EXPECT_EQ(log.count(scale_event::kind::retired, scale_event::cause::idle), s.threads_retired);

    // Still a working pool.
    EXPECT_EQ(pool.submit([] { return 5; }).get(), 5);
    pool.shutdown();
  }
  // Every thread the pool ever started has been joined.
  EXPECT_EQ(process_threads(), threads_before);
  for (const scale_event& e : log.events()) EXPECT_LT(e.worker_index, 16u);
}

TEST(Elastic, SixteenBlockingTasksRunAtOnceWithTheHint) { sixteen_blocked_tasks(true); }

TEST(Elastic, SixteenBlockedTasksRunAtOnceWithoutTheHint) { sixteen_blocked_tasks(false); }

// Every thread blocks on a latch that only a queued task opens: below max_threads the monitor
// must start a thread for it (deadlock by starvation cannot happen).
TEST(Elastic, QueuedTaskThatUnblocksTheOthersStillRuns) {
  scale_log log;
  spool::pool pool{elastic(2, 4, log)};
  std::latch both_blocked(2);
  std::latch gate(1);
  for (int i = 0; i < 2; ++i) {
    pool.post([&] {
      both_blocked.count_down();
      gate.wait();
    });
  }
  both_blocked.wait();
  pool.post([&] { gate.count_down(); });
  pool.wait_idle();
  EXPECT_GE(pool.statistics().grown_for_load, 1u);
}

// The same, with the opener pushed onto a blocked worker's own deque: only stealing by a
// thread started for it can reach it.
TEST(Elastic, OpenerOnABlockedWorkersDequeIsStolen) {
  scale_log log;
  spool::pool pool{elastic(1, 3, log)};
  std::latch gate(1);
  pool.post([&] {
    // Pushed onto this worker's deque, then this worker blocks without a hint.
    pool.post([&] { gate.count_down(); });
    gate.wait();
  });
  pool.wait_idle();
  EXPECT_GE(pool.statistics().grown_for_load, 1u);
}

// Never above max_threads, however many tasks block.
TEST(Elastic, StopsAtMaxThreads) {
  scale_log log;
  spool::pool pool{elastic(1, 3, log)};
  std::latch three_running(3);
  std::latch release(1);
  std::atomic<int> ran{0};
  for (int i = 0; i < 6; ++i) {
    pool.post([&] {
      spool::blocking_region blocking;
      ran.fetch_add(1);
      three_running.count_down();
      release.wait();
    });
  }
  three_running.wait();
  const spool::stats s = pool.statistics();
  EXPECT_EQ(s.threads_live, 3u);
  EXPECT_LE(s.threads_started, 3u);
  release.count_down();
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 6);
}

// Nested regions count once; a region off the pool does nothing.
TEST(Elastic, BlockingRegionsNestAndAreHarmlessOutsideAPool) {
  { spool::blocking_region outside; }
  spool_blocking_begin();
  spool_blocking_end();

  scale_log log;
  spool::pool pool{elastic(1, 4, log)};
  std::latch inside(1);
  std::latch release(1);
  pool.post([&] {
    spool::blocking_region outer;
    spool::blocking_region inner;
    inside.count_down();
    release.wait();
  });
  inside.wait();
  EXPECT_EQ(pool.statistics().threads_blocked, 1u);
  EXPECT_EQ(pool.statistics().grown_for_blocking, 1u);
  release.count_down();
  pool.wait_idle();
  EXPECT_EQ(pool.statistics().threads_blocked, 0u);
}

// Events add up: started minus retired is what is live, starts at min, and indexes are slots.
TEST(Elastic, ScaleEventsAddUp) {
  scale_log log;
  {
    spool::pool pool{elastic(2, 6, log)};
    for (int round = 0; round < stress_iterations(5); ++round) {
      std::latch running(6);
      std::latch release(1);
      for (int i = 0; i < 6; ++i) {
        pool.post([&] {
          spool::blocking_region blocking;
          running.count_down();
          release.wait();
        });
      }
      running.wait();
      release.count_down();
      pool.wait_idle();
      log.wait_for_live(2);
    }
  }
  std::size_t started = 0, retired = 0;
  for (const scale_event& e : log.events()) {
    (e.what == scale_event::kind::started ? started : retired) += 1;
    EXPECT_LT(e.worker_index, 6u);
  }
  EXPECT_EQ(started, retired);  // the pool is gone: everything started was retired
  EXPECT_EQ(log.count(scale_event::kind::started, scale_event::cause::initial), 2u);
  EXPECT_EQ(log.count(scale_event::kind::retired, scale_event::cause::shutdown), 2u);
}

// Growth, retirement and shutdown racing: blocking tasks keep arriving while threads retire
// with a zero keep_alive, and the pool shuts down with work in flight. Nothing lost, nothing
// leaked (ASan), no hang (the watchdog).
TEST(Elastic, GrowRetireAndShutdownRace) {
  const int rounds = stress_iterations(40);
  for (int round = 0; round < rounds; ++round) {
    scale_log log;
    std::atomic<int> ran{0};
    {
      spool::pool pool{elastic(1, 8, log, 0ns)};
      for (int i = 0; i < 64; ++i) {
        pool.post([&, i] {
          if (i % 3 == 0) {
            spool::blocking_region blocking;
            std::this_thread::yield();
          }
          ran.fetch_add(1, std::memory_order_relaxed);
        });
      }
      if (round % 2 == 0) pool.wait_idle();
    }
    EXPECT_EQ(ran.load(), 64);
  }
}

TEST(Elastic, CApiConfiguresAnElasticPool) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.min_threads = 1;
  cfg.max_threads = 4;
  cfg.keep_alive_ms = 5;
  std::atomic<int> started{0};
  cfg.on_scale = [](const spool_scale_event* e, void* arg) {
    if (e->what == SPOOL_SCALE_STARTED) static_cast<std::atomic<int>*>(arg)->fetch_add(1);
  };
  cfg.on_scale_arg = &started;
  spool_pool* pool = nullptr;
  ASSERT_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  struct ctx {
    std::latch running{2};
    std::latch release{1};
  } c;
  auto body = [](void* arg) {
    auto* x = static_cast<ctx*>(arg);
    spool_blocking_begin();
    x->running.count_down();
    x->release.wait();
    spool_blocking_end();
  };
  ASSERT_EQ(spool_submit(pool, body, &c), SPOOL_OK);
  ASSERT_EQ(spool_submit(pool, body, &c), SPOOL_OK);
  c.running.wait();
  spool_stats s;
  ASSERT_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  EXPECT_GE(s.threads_live, 2u);
  EXPECT_GE(s.grown_for_blocking, 1u);
  c.release.count_down();
  ASSERT_EQ(spool_destroy(pool), SPOOL_OK);
  EXPECT_GE(started.load(), 2);

  cfg.min_threads = 3;
  cfg.max_threads = 2;
  EXPECT_EQ(spool_create(&cfg, &pool), SPOOL_EINVAL);
  EXPECT_EQ(pool, nullptr);
}

}  // namespace
