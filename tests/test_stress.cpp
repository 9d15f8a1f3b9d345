// Stress: many iterations of the races a pool must survive: submissions racing shutdown,
// parking racing wake-ups, stealing racing the owner's pops, and pools created and destroyed
// with work in flight. Each test checks that no task is lost or run twice; the watchdog in
// test_main.cpp turns a hang into a failure. No sleeps, no timing assertions.
//
// SPOOL_STRESS_SCALE (default 1.0) multiplies every iteration count, so a sanitizer build can
// run fewer.
#include <gtest/gtest.h>

#include <spool/spool.h>
#include <spool/parallel.hpp>
#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdlib>
#include <latch>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "support.hpp"

namespace {

using spool_test::release_counter;

int iterations(int base) {
  double scale = 1.0;
  if (const char* s = std::getenv("SPOOL_STRESS_SCALE")) scale = std::atof(s);
  if (!(scale > 0.0)) scale = 1.0;
  return std::max(1, static_cast<int>(base * scale));
}

spool::config pool_config(unsigned threads, std::size_t capacity = 0, unsigned spin_rounds = 64) {
  spool::config cfg;
  cfg.threads = threads;
  cfg.queue_capacity = capacity;
  cfg.spin_rounds = spin_rounds;
  return cfg;
}

// What happened to the tasks of one iteration. Every attempt gets an id; runs[id] counts how
// often that task ran, so a task run twice is caught directly.
struct ledger {
  static constexpr int max_attempts = 1024;
  std::atomic<int> attempts{0};  // submissions tried, from outside or from tasks
  std::atomic<int> refused{0};   // submissions that failed (always errc::shut_down here)
  std::atomic<int> wrong_error{0};
  std::atomic<int> ran{0};
  std::atomic<int> released{0};  // callables destroyed
  std::atomic<int> futures_ok{0};
  std::atomic<int> futures_cancelled{0};
  std::vector<std::atomic<int>> runs = std::vector<std::atomic<int>>(max_attempts);

  int next_id() {
    int id = attempts++;
    if (id >= max_attempts) std::abort();  // the test's own sizing is wrong
    return id;
  }
  void run(int id) {
    ++runs[id];
    ++ran;
  }
  int ran_more_than_once() const {
    int n = 0;
    for (const auto& r : runs) n += r.load() > 1;
    return n;
  }
};

void note_refusal(ledger& l, std::error_code ec) {
  ++l.refused;
  if (ec != spool::errc::shut_down) ++l.wrong_error;
}

// A task that records its run and, if `spawn`, submits one child from inside the pool.
auto tracked_task(spool::pool& p, ledger& l, bool spawn) {
  return [&p, &l, spawn, id = l.next_id(), guard = release_counter(l.released)] {
    l.run(id);
    if (spawn) {
      std::error_code ec =
          p.try_post([&l, child = l.next_id(), g = release_counter(l.released)] { l.run(child); });
      if (ec) note_refusal(l, ec);
    }
    return 1;
  };
}

// One producer's share: k submissions, alternating submit(), post() and try_post().
void produce(spool::pool& p, ledger& l, int k, std::atomic<int>& accepted,
             std::vector<spool::future<int>>& futures) {
  for (int i = 0; i < k; ++i) {
    const bool spawn = i % 4 == 0;
    std::error_code ec;
    try {
      switch (i % 3) {
        case 0:
          futures.push_back(p.submit(tracked_task(p, l, spawn)));
          break;
        case 1:
          p.post([t = tracked_task(p, l, spawn)]() mutable { t(); });
          break;
        default:
          ec = p.try_post([t = tracked_task(p, l, spawn)]() mutable { t(); });
      }
    } catch (const spool::error& e) {
      ec = e.code();
    }
    if (ec) {
      note_refusal(l, ec);
    } else {
      accepted.fetch_add(1);
      accepted.notify_one();
    }
  }
}

}  // namespace

// (a) Four producers race shutdown(drain), shutdown(discard) and close(). Every attempt is
// refused, run or dropped exactly once; discard's count equals the drops seen through the
// futures and released callables; the stats agree.
TEST(Stress, SubmitRacesShutdown) {
  constexpr int producers = 4;
  constexpr int per_producer = 48;
  const int rounds = iterations(600);
  for (int round = 0; round < rounds; ++round) {
    const int how = round % 3;  // 0: drain, 1: discard, 2: close
    SCOPED_TRACE(round);
    ledger l;
    std::atomic<int> accepted{0};
    std::vector<std::vector<spool::future<int>>> futures(producers);
    std::size_t dropped = 0;
    {
      spool::pool p{pool_config(2, round % 2 == 0 ? 0 : 8, round % 4 < 2 ? 0 : 64)};
      std::latch go{producers + 1};
      std::vector<std::thread> threads;
      for (int t = 0; t < producers; ++t) {
        threads.emplace_back([&, t] {
          go.arrive_and_wait();
          produce(p, l, per_producer, accepted, futures[t]);
        });
      }
      go.arrive_and_wait();
      // Let a varying number of submissions in before stopping (0 to 90).
      const int head_start = (round * 7) % 91;
      for (int seen = accepted.load(); seen < head_start; seen = accepted.load()) {
        accepted.wait(seen);
      }
      if (how == 0) dropped = p.shutdown(spool::shutdown_mode::drain);
      if (how == 1) dropped = p.shutdown(spool::shutdown_mode::discard);
      if (how == 2) p.close();
      for (auto& t : threads) t.join();
      if (how == 2) {
        EXPECT_EQ(p.shutdown(), 0u);
      }

      spool::stats s = p.statistics();
      const int cancelled = l.attempts - l.refused - l.ran;
      EXPECT_EQ(l.released, l.attempts) << "a callable was leaked or released twice";
      EXPECT_EQ(l.wrong_error, 0);
      EXPECT_EQ(l.ran_more_than_once(), 0);
      EXPECT_GE(cancelled, 0);
      EXPECT_EQ(static_cast<std::size_t>(cancelled), dropped);
      if (how != 1) {
        EXPECT_EQ(cancelled, 0);
      }
      EXPECT_EQ(s.cancelled, static_cast<std::uint64_t>(cancelled));
      EXPECT_EQ(s.completed, static_cast<std::uint64_t>(l.ran.load()));
      EXPECT_EQ(s.submitted, static_cast<std::uint64_t>(l.attempts - l.refused));
      EXPECT_EQ(s.rejected, static_cast<std::uint64_t>(l.refused.load()));
      EXPECT_EQ(s.queued, 0u);
    }
    int futures_total = 0;
    for (auto& fs : futures) {
      for (auto& f : fs) {
        ++futures_total;
        try {
          EXPECT_EQ(f.get(), 1);
          ++l.futures_ok;
        } catch (const spool::task_cancelled&) {
          ++l.futures_cancelled;
        }
      }
    }
    EXPECT_EQ(l.futures_ok + l.futures_cancelled, futures_total);
    if (how != 1) {
      EXPECT_EQ(l.futures_cancelled, 0);
    }
    if (HasFailure()) break;  // one failing round says enough
  }
}

namespace c_tasks {

struct tally {
  std::atomic<int> ran{0};
  std::atomic<int> cancelled{0};
};
void run(void* arg) { ++static_cast<tally*>(arg)->ran; }
void cancel(void* arg) { ++static_cast<tally*>(arg)->cancelled; }

}  // namespace c_tasks

// (a, C API) Producers race spool_shutdown(DISCARD): each accepted task either ran or had its
// on_cancel hook called, once, and the count spool_shutdown reports is the hooks' count.
TEST(Stress, CSubmitRacesShutdownDiscard) {
  constexpr int producers = 4;
  constexpr int per_producer = 64;
  const int rounds = iterations(200);
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(round);
    c_tasks::tally tally;
    std::atomic<int> accepted{0}, refused{0}, wrong_error{0};
    spool_config cfg;
    spool_config_init(&cfg);
    cfg.threads = 2;
    cfg.queue_capacity = round % 2 == 0 ? 0 : 4;
    spool_pool* pool = nullptr;
    ASSERT_EQ(spool_create(&cfg, &pool), SPOOL_OK);
    std::latch go{producers + 1};
    std::vector<std::thread> threads;
    for (int t = 0; t < producers; ++t) {
      threads.emplace_back([&] {
        go.arrive_and_wait();
        for (int i = 0; i < per_producer; ++i) {
          int rc = spool_submit_ex(pool, c_tasks::run, &tally, c_tasks::cancel);
          if (rc == SPOOL_OK) {
            accepted.fetch_add(1);
            accepted.notify_one();
          } else {
            ++refused;
            if (rc != SPOOL_ESHUTDOWN) ++wrong_error;
          }
        }
      });
    }
    go.arrive_and_wait();
    const int head_start = (round * 13) % 120;
    for (int seen = accepted.load(); seen < head_start; seen = accepted.load()) {
      accepted.wait(seen);
    }
    std::size_t dropped = 0;
    EXPECT_EQ(spool_shutdown(pool, SPOOL_SHUTDOWN_DISCARD, &dropped), SPOOL_OK);
    for (auto& t : threads) t.join();
    EXPECT_EQ(wrong_error, 0);
    EXPECT_EQ(accepted + refused, producers * per_producer);
    EXPECT_EQ(tally.ran + tally.cancelled, accepted.load());
    EXPECT_EQ(static_cast<std::size_t>(tally.cancelled), dropped);
    spool_stats s;
    ASSERT_EQ(spool_get_stats(pool, &s), SPOOL_OK);
    EXPECT_EQ(s.cancelled, dropped);
    EXPECT_EQ(s.completed, static_cast<std::uint64_t>(tally.ran.load()));
    EXPECT_EQ(spool_destroy(pool), SPOOL_OK);
    if (HasFailure()) break;
  }
}

// (b) Park vs wake: one task at a time to a pool whose workers go to sleep between tasks,
// waited for from outside with get() and with a timed wait. A lost wake-up hangs here.
TEST(Stress, SingleTaskWakesAParkedPool) {
  const int rounds = iterations(20000);
  for (unsigned spin : {0u, 64u}) {
    spool::pool p{pool_config(2, 0, spin)};
    for (int i = 0; i < rounds; ++i) {
      auto f = p.submit([i] { return i; });
      if (i % 2 == 0) {
        ASSERT_EQ(f.get(), i);
      } else {
        while (!f.wait_for(std::chrono::hours(1))) {
        }
        ASSERT_EQ(f.get(), i);
      }
    }
    p.wait_idle();
    EXPECT_EQ(p.statistics().completed, static_cast<std::uint64_t>(rounds));
  }
}

// (b) Bursts from three producers, then wait_idle(), over and over: every burst fully ran.
// With 8 workers, several of them often finish the burst's last tasks at once; only the one
// that sees the pool quiescent wakes the waiter (quiescence::notify), so a miss there
// would hang here.
TEST(Stress, BurstsThenWaitIdle) {
  constexpr int producers = 3;
  constexpr int burst = 40;
  const int rounds = iterations(800);
  for (auto [workers, spin] : {std::pair{2u, 0u}, std::pair{2u, 64u}, std::pair{8u, 0u}}) {
    std::atomic<int> ran{0};
    std::barrier sync{producers + 1};
    spool::pool p{pool_config(workers, 16, spin)};
    std::vector<std::thread> threads;
    for (int t = 0; t < producers; ++t) {
      threads.emplace_back([&] {
        for (int r = 0; r < rounds; ++r) {
          sync.arrive_and_wait();  // start of the burst
          for (int i = 0; i < burst; ++i) p.post([&ran] { ++ran; });
          sync.arrive_and_wait();  // end of the burst
          sync.arrive_and_wait();  // main has checked
        }
      });
    }
    int expected = 0;
    for (int r = 0; r < rounds; ++r) {
      sync.arrive_and_wait();
      sync.arrive_and_wait();
      p.wait_idle();
      expected += producers * burst;
      EXPECT_EQ(ran.load(), expected);
      sync.arrive_and_wait();
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(ran.load(), producers * burst * rounds);
  }
}

namespace {

int fib(spool::pool& p, int n) {
  if (n < 2) return n;
  auto left = p.submit([&p, n] { return fib(p, n - 1); });
  int right = fib(p, n - 2);
  return left.get() + right;
}

// The same with parallel_invoke: the forked half lives on the forking frame (src/api/join.cpp).
// Each half counts its runs in `halves`, so a half run twice or never shows even where the sum
// would not.
int fib_join(spool::pool& p, int n, std::atomic<long>& halves) {
  if (n < 2) return n;
  int a = 0, b = 0;
  spool::parallel_invoke(
      p, [&] { a = fib_join(p, n - 1, halves); },
      [&] {
        b = fib_join(p, n - 2, halves);
        halves.fetch_add(1, std::memory_order_relaxed);
      });
  return a + b;
}

}  // namespace

// (c) Fork/join storms: two outside threads run parallel fib on the same 2- or 3-thread pool
// at once, repeatedly (steals race the owners' pops and the helpers' waits).
TEST(Stress, ForkJoinStorms) {
  const int rounds = iterations(300);
  for (unsigned threads : {2u, 3u}) {
    spool::pool p{pool_config(threads, 0, threads == 2 ? 0 : 64)};
    auto caller = [&] {
      for (int r = 0; r < rounds; ++r) {
        int v = p.submit([&p] { return fib(p, 16); }).get();
        if (v != 987) {
          ADD_FAILURE() << "fib(16) = " << v;
          return;
        }
      }
    };
    std::thread other(caller);
    caller();
    other.join();
    EXPECT_EQ(p.statistics().failed, 0u);
  }
}

// (c) Join storms: as above with parallel_invoke, on 2 to 4 threads, so that thieves take the
// forked halves off the frames that own them while the owners take them back, and owners whose
// half was stolen help or sleep until it is done. fib(16) forks 1,596 times.
TEST(Stress, JoinStormsRunEachHalfOnce) {
  const int rounds = iterations(300);
  for (unsigned threads : {2u, 3u, 4u}) {
    spool::pool p{pool_config(threads)};
    auto caller = [&] {
      for (int r = 0; r < rounds; ++r) {
        std::atomic<long> halves{0};
        const int v = p.submit([&] { return fib_join(p, 16, halves); }).get();
        if (v != 987 || halves.load() != 1596) {
          ADD_FAILURE() << "fib(16) = " << v << " with " << halves.load() << " forked halves run";
          return;
        }
      }
    };
    std::thread other(caller);
    caller();
    other.join();
    const spool::stats s = p.statistics();
    EXPECT_EQ(s.failed, 0u);
    EXPECT_EQ(s.cancelled, 0u);
  }
}

// (c) A task spawns many children into its own deque and waits for them all; the other workers
// steal while it pops. Each child must run exactly once.
TEST(Stress, SpawnStormRunsEachChildOnce) {
  constexpr int children = 300;
  const int rounds = iterations(500);
  spool::pool p{pool_config(3)};
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::atomic<int>> runs(children);
    std::atomic<bool> stolen{false};
    spool_test::get_elsewhere(p.submit([&] {
      const int spawner = spool::this_worker_index();
      std::vector<spool::future<void>> fs;
      fs.reserve(children);
      for (int i = 0; i < children; ++i) {
        fs.push_back(p.submit([&runs, &stolen, spawner, i] {
          ++runs[i];
          if (spool::this_worker_index() != spawner && !stolen.exchange(true)) stolen.notify_one();
        }));
      }
      // Until another worker has stolen a child, this one does not pop (a loaded machine could
      // otherwise let it run every child itself); then the owner's pops race the thieves.
      stolen.wait(false);
      for (auto& f : fs) f.get();
    }));
    int wrong = 0;
    for (auto& n : runs) wrong += n.load() != 1;
    ASSERT_EQ(wrong, 0) << "round " << r;
  }
  EXPECT_GT(p.statistics().stolen, 0u);
}

// (d) Pools created and destroyed in a loop with work in flight: the destructor drains every
// queued task and the tasks they spawn, and futures outlive their pool.
TEST(Stress, CreateDestroyWithWorkInFlight) {
  const int rounds = iterations(300);
  for (int r = 0; r < rounds; ++r) {
    std::atomic<int> ran{0};
    std::vector<spool::future<int>> futures;
    constexpr int tasks = 20;
    {
      spool::pool p{pool_config(1 + r % 3, r % 2 == 0 ? 0 : 4, r % 4 < 2 ? 0 : 64)};
      for (int i = 0; i < tasks; ++i) {
        if (i % 2 == 0) {
          p.post([&] {
            p.post([&ran] { ++ran; });
            ++ran;
          });
        } else {
          futures.push_back(p.submit([&ran, i] {
            ++ran;
            return i;
          }));
        }
      }
    }  // ~pool with work in flight
    EXPECT_EQ(ran.load(), tasks + tasks / 2);
    for (int i = 0; i < tasks / 2; ++i) EXPECT_EQ(futures[i].get(), 2 * i + 1);
    if (HasFailure()) break;
  }
}

// (d, C API) The same through spool_create/spool_destroy.
TEST(Stress, CCreateDestroyWithWorkInFlight) {
  const int rounds = iterations(300);
  for (int r = 0; r < rounds; ++r) {
    c_tasks::tally tally;
    spool_config cfg;
    spool_config_init(&cfg);
    cfg.threads = 1 + r % 3;
    cfg.spin_rounds = r % 2 == 0 ? 0 : 64;
    spool_pool* pool = nullptr;
    ASSERT_EQ(spool_create(&cfg, &pool), SPOOL_OK);
    for (int i = 0; i < 20; ++i) ASSERT_EQ(spool_submit(pool, c_tasks::run, &tally), SPOOL_OK);
    ASSERT_EQ(spool_destroy(pool), SPOOL_OK);
    ASSERT_EQ(tally.ran, 20);
  }
}
