// A thread outside the pool that waits on the future of a task it submitted runs the task
// itself when no worker has taken it yet and it is the oldest in the thread's producer slot
// (src/README.md, "An outside waiter runs its own task"). The result is delivered, the task
// runs exactly once, the statistics count it, and a producer's tasks still start in order.
#include <gtest/gtest.h>

#include <spool/spool.hpp>

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core_testing.hpp"
#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using namespace spool_test;

// Every worker held: the task can only run if the waiter runs it.
TEST(OwnTask, WaiterRunsItsTaskWhileTheWorkersAreBusy) {
  spool::pool p(pool_config(1));
  gate release;
  std::latch started(1);
  hold_workers(p, started, release);
  const std::thread::id me = std::this_thread::get_id();
  spool::future<std::thread::id> f = p.submit([] { return std::this_thread::get_id(); });
  EXPECT_EQ(f.get(), me);
  spool::future<void> g = p.submit([] { throw std::runtime_error("inline"); });
  EXPECT_THROW(g.get(), std::runtime_error);
  release.open();
  p.wait_idle();
  const spool::stats s = p.statistics();
  EXPECT_EQ(s.submitted, 3u);
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.failed, 1u);
}

// A task run by its waiter cannot wait for the pool to go idle: it would wait for itself.
TEST(OwnTask, WaitIdleFromATaskRunByItsWaiterReportsWouldDeadlock) {
  spool::pool p(pool_config(1));
  gate release;
  std::latch started(1);
  hold_workers(p, started, release);
  const std::thread::id me = std::this_thread::get_id();
  spool::future<bool> f = p.submit([&p, me] {
    EXPECT_EQ(std::this_thread::get_id(), me);
    return error_code_of([&p] { p.wait_idle(); }) == spool::errc::would_deadlock;
  });
  EXPECT_TRUE(f.get());
  release.open();
}

// A task behind older ones of the same producer is not taken back: the worker runs the older
// one first and holds the rest in its batch, so the waiter waits; order is kept.
TEST(OwnTask, NotTakenBackPastOlderTasksOfTheSameProducer) {
  spool::pool p(pool_config(1));
  gate release;
  std::latch started(1);
  hold_workers(p, started, release);
  std::atomic<int> step{0};
  int older_at = -1;
  p.post([&] { older_at = step++; });
  spool::future<int> f = p.submit([&] { return step++; });
  std::thread releaser([&] { release.open(); });
  const int mine_at = f.get();
  releaser.join();
  EXPECT_EQ(older_at, 0);
  EXPECT_EQ(mine_at, 1);
}

// A bounded pool's waiter takes its task back too, and the task's room in the bound with it:
// with the only worker held and the queue full, the waiter runs its task, and the room that
// frees lets the next submission in.
TEST(OwnTask, BoundedPoolsTakeBackAndFreeTheRoom) {
  const std::thread::id me = std::this_thread::get_id();
  for (spool::full_policy policy : {spool::full_policy::block, spool::full_policy::block_for,
                                    spool::full_policy::reject, spool::full_policy::caller_runs}) {
    spool::pool p(pool_config(1, 1, policy));
    const spool::detail::core& c = spool::detail::pool_access::of(p);
    gate release;
    std::latch started(1);
    hold_workers(p, started, release);
    spool::future<std::thread::id> f = p.submit([] { return std::this_thread::get_id(); });
    EXPECT_EQ(spool::detail::core_testing::bound_in_use(c), 1u);
    EXPECT_EQ(f.get(), me);
    EXPECT_EQ(spool::detail::core_testing::bound_in_use(c), 0u);
    EXPECT_FALSE(p.try_post([] {})) << "the room the waiter took back was not freed";
    release.open();
    p.wait_idle();
    EXPECT_EQ(spool::detail::core_testing::bound_in_use(c), 0u);
    EXPECT_EQ(p.statistics().completed, 3u);
  }
}

// Paths that never take a task back: a discard_oldest pool (no producer slots: its oldest
// task must be found in one queue), and high or low priority (the shared queue). The workers
// run those.
TEST(OwnTask, DiscardOldestPoolsAndOtherPrioritiesRunOnAWorker) {
  const std::thread::id me = std::this_thread::get_id();
  {
    spool::pool p(pool_config(1, 64, spool::full_policy::discard_oldest));
    EXPECT_NE(p.submit([] { return std::this_thread::get_id(); }).get(), me);
  }
  spool::pool p(pool_config(1));
  EXPECT_NE(p.submit(spool::priority::high, [] { return std::this_thread::get_id(); }).get(), me);
  EXPECT_NE(p.submit(spool::priority::low, [] { return std::this_thread::get_id(); }).get(), me);
  // Waiting from another thread than the submitter: the task is not in the waiter's slot.
  gate release;
  std::latch started(1);
  hold_workers(p, started, release);
  spool::future<std::thread::id> f = p.submit([] { return std::this_thread::get_id(); });
  std::thread::id ran_on, other_id;
  std::thread other([&] {
    other_id = std::this_thread::get_id();
    ran_on = f.get();
  });
  release.open();
  other.join();
  EXPECT_NE(ran_on, other_id);
  EXPECT_NE(ran_on, me);
}

// What the pause inside take_back does in the next test. With the slot's lock held, it lets
// the held worker go and watches it: either the worker parks (listed among the sleepers and
// asleep in the kernel: the futex is the one place a listed worker sleeps, the parker's mutex
// is not contended here), or it keeps searching until it has used 20 ms of CPU time, far more
// than a search, a last look and a park take.
struct lock_held_while_searching {
  static inline gate* release = nullptr;
  static inline spool::detail::core* pool = nullptr;
  static inline std::atomic<pid_t> worker_tid{0};
  static inline clockid_t worker_clock{};
  static inline bool parked = false;

  static char thread_state(pid_t tid) {
    std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const std::size_t after_name = line.rfind(')');  // the name may hold spaces
    return after_name == std::string::npos || after_name + 2 >= line.size() ? '?'
                                                                            : line[after_name + 2];
  }
  static std::chrono::nanoseconds cpu_time() {
    timespec ts{};
    clock_gettime(worker_clock, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  }
  static void pause() {
    const auto start = cpu_time();
    release->open();
    for (;;) {
      if (spool::detail::core_testing::sleepers(*pool) != 0 &&
          thread_state(worker_tid.load()) == 'S') {
        parked = true;
        return;
      }
      if (cpu_time() - start >= std::chrono::milliseconds(20)) return;
      std::this_thread::yield();
    }
  }
};

// The waiter takes its own task back, holding the slot's lock for a moment, while the only
// worker searches the slot, which holds one more task. A brief holder wakes nobody when it
// lets go, so the worker must count the lock as a lost race and look again, not park: parked,
// it would sleep with that task queued.
TEST(OwnTask, WorkerThatMeetsTheTakeBackLockSearchesAgain) {
  spool::config cfg = pool_config(1);
  cfg.spin_rounds = 0;
  cfg.defer_period = std::chrono::microseconds(0);
  cfg.on_worker_start = [](unsigned) {
    lock_held_while_searching::worker_tid = gettid();
    pthread_getcpuclockid(pthread_self(), &lock_held_while_searching::worker_clock);
  };
  spool::pool p(cfg);
  gate release;
  std::latch started(1);
  hold_workers(p, started, release);
  const std::thread::id me = std::this_thread::get_id();
  spool::future<std::thread::id> f = p.submit([] { return std::this_thread::get_id(); });
  std::atomic<bool> newer_ran{false};
  p.post([&newer_ran] { newer_ran = true; });
  lock_held_while_searching::release = &release;
  lock_held_while_searching::pool = &spool::detail::pool_access::of(p);
  spool::detail::queues_testing::set_take_back_pause(&lock_held_while_searching::pause);
  const std::thread::id ran_on = f.get();
  spool::detail::queues_testing::set_take_back_pause(nullptr);
  EXPECT_EQ(ran_on, me);                            // taken back: it was the oldest
  ASSERT_FALSE(lock_held_while_searching::parked);  // else nothing would wake it for the rest
  p.wait_idle();
  EXPECT_TRUE(newer_ran.load());
  EXPECT_EQ(p.statistics().completed, 3u);
}

// Outside threads submitting and waiting, round trip after round trip, racing the workers
// (which steal from the same slots): every task runs exactly once and delivers its result.
TEST(OwnTask, StressWaitersRaceStealingWorkers) {
  const int per_thread = stress_iterations(20000);
  constexpr int producers = 3;
  spool::pool p(pool_config(2));
  const std::size_t total = static_cast<std::size_t>(per_thread) * producers;
  std::unique_ptr<std::atomic<int>[]> runs(new std::atomic<int>[total]);
  for (std::size_t i = 0; i < total; ++i) runs[i] = 0;
  std::atomic<std::size_t> wrong{0};
  std::vector<std::thread> ts;
  for (int k = 0; k < producers; ++k) {
    ts.emplace_back([&, k] {
      for (int i = 0; i < per_thread; ++i) {
        const std::size_t at =
            static_cast<std::size_t>(k) * per_thread + static_cast<std::size_t>(i);
        // Now and then a fire-and-forget task first, so the awaited one is not the oldest.
        if (i % 7 == 0) p.post([] {});
        spool::future<std::size_t> f = p.submit([&runs, at] {
          runs[at].fetch_add(1);
          return at;
        });
        if (f.get() != at) wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  p.wait_idle();
  std::size_t not_once = 0;
  for (std::size_t i = 0; i < total; ++i) not_once += runs[i].load() != 1;
  EXPECT_EQ(not_once, 0u);
  EXPECT_EQ(wrong.load(), 0u);
  const spool::stats s = p.statistics();
  EXPECT_EQ(s.completed, s.submitted);
  EXPECT_EQ(s.queued, 0u);
}

}  // namespace
