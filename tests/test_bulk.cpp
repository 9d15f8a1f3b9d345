// Bulk submission: post_bulk / post_n / spool_submit_bulk run every accepted task exactly once,
// in order on one worker, from outside the pool and from inside it, and stop cleanly at a
// full queue or a closed pool, leaving the rest unrun and counted as rejected. post_n's range
// path (src/api/range.cpp): exceptions counted per index, a discarding shutdown that cancels what
// was not claimed, high-priority work let through between chunks, and the shared callable
// freed before the pool is idle.
#include <gtest/gtest.h>

#include <spool/spool.h>
#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using spool_test::pool_config;

TEST(Bulk, PostNRunsEveryIndexOnce) {
  spool::pool pool{pool_config(2)};
  constexpr std::size_t n = 20000;
  std::vector<std::atomic<int>> hits(n);
  pool.post_n(n, [&](std::size_t i) { hits[i].fetch_add(1, std::memory_order_relaxed); });
  pool.wait_idle();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
  const spool::stats s = pool.statistics();
  EXPECT_EQ(s.submitted, n);
  EXPECT_EQ(s.completed, n);
}

TEST(Bulk, PostBulkMovesEachCallableIntoItsTask) {
  spool::pool pool{pool_config(2)};
  std::atomic<int> sum{0};
  std::vector<std::function<void()>> work;
  for (int i = 1; i <= 100; ++i) {
    auto owned = std::make_unique<int>(i);
    work.emplace_back([&sum, v = std::shared_ptr<int>(std::move(owned))] { sum += *v; });
  }
  pool.post_bulk(work.begin(), work.end());
  pool.wait_idle();
  EXPECT_EQ(sum.load(), 5050);
  for (const auto& f : work) EXPECT_FALSE(f);  // moved from
}

TEST(Bulk, OneWorkerRunsABatchInOrder) {
  std::vector<std::size_t> seen;  // only the single worker writes it
  {
    spool::pool pool{pool_config(1)};
    pool.post_n(1000, [&](std::size_t i) { seen.push_back(i); });
  }
  ASSERT_EQ(seen.size(), 1000u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
}

TEST(Bulk, FromInsideATask) {
  spool::pool pool{pool_config(2)};
  std::atomic<int> ran{0};
  pool.post([&] { pool.post_n(500, [&](std::size_t) { ran.fetch_add(1); }); });
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 500);
}

TEST(Bulk, StopsAtAFullQueueAndLeavesTheRest) {
  spool::pool pool{pool_config(1, 4, spool::full_policy::reject)};
  std::latch started(1), release(1);
  spool_test::hold_workers(pool, started, release);
  std::atomic<int> ran{0};
  std::vector<std::function<void()>> work(10, [&] { ran.fetch_add(1); });
  const spool::bulk_result r = pool.try_post_bulk(work.begin(), work.end());
  EXPECT_EQ(r.accepted, 4u);
  EXPECT_EQ(r.error, spool::errc::full);
  // Taken: 0-3; consumed by the refused attempt: 4; untouched: the rest.
  for (std::size_t i = 0; i < work.size(); ++i) EXPECT_EQ(static_cast<bool>(work[i]), i >= 5) << i;
  EXPECT_EQ(spool_test::error_code_of([&] { pool.post_n(3, [](std::size_t) {}); }),
            spool::errc::full);
  release.count_down();
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 4);
}

TEST(Bulk, ClosedPoolRefusesTheWholeBatch) {
  spool::pool pool{pool_config(2)};
  pool.close();
  std::atomic<int> ran{0};
  const spool::bulk_result r = pool.try_post_n(50, [&](std::size_t) { ran.fetch_add(1); });
  EXPECT_EQ(r.accepted, 0u);
  EXPECT_EQ(r.error, spool::errc::shut_down);
  EXPECT_EQ(pool.statistics().rejected, 50u);
  pool.shutdown();
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(pool.statistics().submitted, 0u);
}

TEST(Bulk, EmptyBatchIsANoOp) {
  spool::pool pool{pool_config(1)};
  std::vector<std::function<void()>> none;
  const spool::bulk_result r = pool.try_post_bulk(none.begin(), none.end());
  EXPECT_EQ(r.accepted, 0u);
  EXPECT_FALSE(r.error);
}

// Batches racing shutdown(drain): every task a batch reports accepted runs exactly once, and
// nothing else does.
TEST(Bulk, BatchesRacingShutdownLoseNothing) {
  for (int round = 0; round < stress_iterations(100); ++round) {
    std::atomic<std::size_t> ran{0}, accepted{0};
    auto pool = std::make_unique<spool::pool>(pool_config(2));
    std::latch go(3);
    std::vector<std::thread> producers;
    for (int p = 0; p < 2; ++p) {
      producers.emplace_back([&] {
        go.arrive_and_wait();
        for (int b = 0; b < 20; ++b) {
          const auto r = pool->try_post_n(64, [&](std::size_t) { ran.fetch_add(1); });
          accepted.fetch_add(r.accepted);
          if (r.error) {
            EXPECT_EQ(r.error, spool::errc::shut_down);
            break;
          }
        }
      });
    }
    go.arrive_and_wait();
    pool->shutdown();
    for (auto& t : producers) t.join();
    EXPECT_EQ(ran.load(), accepted.load());
    const spool::stats s = pool->statistics();
    EXPECT_EQ(s.submitted, accepted.load());
    EXPECT_EQ(s.completed, accepted.load());
  }
}

// Every index of a batch runs once however many workers share it, oversubscribed included,
// and from inside a task too.
TEST(Bulk, PostNSharedByManyWorkers) {
  for (unsigned threads : {1u, 3u, 8u, 16u}) {
    SCOPED_TRACE(threads);
    spool::pool pool{pool_config(threads)};
    constexpr std::size_t n = 50000;
    std::vector<std::atomic<int>> hits(n);
    auto count = [&](std::size_t i) { hits[i].fetch_add(1, std::memory_order_relaxed); };
    pool.post_n(n, count);
    pool.post([&] { pool.post_n(n, count); });
    pool.wait_idle();
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 2) << i;
    const spool::stats s = pool.statistics();
    EXPECT_EQ(s.submitted, 2 * n + 1);
    EXPECT_EQ(s.completed, 2 * n + 1);
  }
}

// An index whose call throws is counted failed and its exception handled, once each; the
// others complete.
TEST(Bulk, PostNCountsEachThrowingIndex) {
  std::atomic<int> handled{0};
  spool::config cfg = pool_config(2);
  cfg.on_exception = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::runtime_error&) {
      handled.fetch_add(1);
    }
  };
  spool::pool pool{cfg};
  constexpr std::size_t n = 10000;
  pool.post_n(n, [](std::size_t i) {
    if (i % 7 == 0) throw std::runtime_error("seven");
  });
  pool.wait_idle();
  const std::size_t throwing = (n + 6) / 7;
  EXPECT_EQ(handled.load(), static_cast<int>(throwing));
  const spool::stats s = pool.statistics();
  EXPECT_EQ(s.submitted, n);
  EXPECT_EQ(s.failed, throwing);
  EXPECT_EQ(s.completed, n - throwing);
}

// A callable counting its live copies: the batch's own copy is gone by the time wait_idle()
// returns (the job is freed before the pool can be quiescent).
struct copy_counter {
  explicit copy_counter(std::atomic<int>& live) : live_(&live) { live_->fetch_add(1); }
  copy_counter(const copy_counter& o) : live_(o.live_) { live_->fetch_add(1); }
  copy_counter& operator=(const copy_counter&) = delete;
  ~copy_counter() { live_->fetch_sub(1); }
  void operator()(std::size_t) const {}
  std::atomic<int>* live_;
};

TEST(Bulk, PostNFreesItsCallableBeforeIdle) {
  spool::pool pool{pool_config(2)};
  std::atomic<int> live{0};
  {
    const copy_counter f(live);
    for (int round = 0; round < 100; ++round) {
      pool.post_n(5000, f);
      pool.wait_idle();
      ASSERT_EQ(live.load(), 1) << round;  // only f itself
    }
  }
  EXPECT_EQ(live.load(), 0);
}

// A callable that can only be called as non-const goes in as one task per index, each with a
// copy of its own.
struct mutable_call {
  std::vector<std::atomic<int>>* hits;
  int calls = 0;  // per copy
  void operator()(std::size_t i) {
    ++calls;
    (*hits)[i].fetch_add(calls, std::memory_order_relaxed);
  }
};

TEST(Bulk, PostNWithAMutableCallableCopiesItPerTask) {
  spool::pool pool{pool_config(2)};
  std::vector<std::atomic<int>> hits(300);
  pool.post_n(hits.size(), mutable_call{&hits});
  pool.wait_idle();
  // Each copy is called once, so each index adds exactly 1.
  for (std::size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

// High-priority work submitted while a batch runs goes ahead of the batch's next chunk: on one
// worker it runs right after the call that was running when it came.
TEST(Bulk, HighPriorityPassesARunningBatch) {
  spool::pool pool{pool_config(1)};
  std::latch reached(1), release(1);
  std::vector<long> order;  // only the single worker writes it
  pool.post_n(1000, [&](std::size_t i) {
    if (i == 0) {
      reached.count_down();
      release.wait();
    }
    order.push_back(static_cast<long>(i));
  });
  reached.wait();
  pool.post(spool::priority::high, [&] { order.push_back(-1); });
  release.count_down();
  pool.wait_idle();
  ASSERT_EQ(order.size(), 1001u);
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[1], -1);
  // The batch then goes on in index order.
  for (std::size_t k = 2; k < order.size(); ++k) ASSERT_EQ(order[k], static_cast<long>(k - 1));
}

// A discarding shutdown while batches run: every index runs at most once, what did not run is
// counted cancelled and reported dropped, and the counts add up.
TEST(Bulk, PostNRacingDiscardLosesNothing) {
  for (int round = 0; round < stress_iterations(100); ++round) {
    constexpr std::size_t n = 20000;
    std::vector<std::atomic<int>> hits(2 * n);
    std::atomic<std::size_t> accepted{0};
    auto pool = std::make_unique<spool::pool>(pool_config(2));
    std::latch go(2);
    std::thread producer([&] {
      go.arrive_and_wait();
      for (std::size_t b = 0; b < 2; ++b) {
        const auto r = pool->try_post_n(
            n, [&, b](std::size_t i) { hits[b * n + i].fetch_add(1, std::memory_order_relaxed); });
        accepted.fetch_add(r.accepted);
        if (r.error) {
          EXPECT_EQ(r.error, spool::errc::shut_down);
          break;
        }
      }
    });
    go.arrive_and_wait();
    const std::size_t dropped = pool->shutdown(spool::shutdown_mode::discard);
    producer.join();
    std::size_t ran = 0;
    for (const auto& h : hits) {
      ASSERT_LE(h.load(), 1);
      ran += static_cast<std::size_t>(h.load());
    }
    EXPECT_EQ(ran + dropped, accepted.load());
    const spool::stats s = pool->statistics();
    EXPECT_EQ(s.submitted, accepted.load());
    EXPECT_EQ(s.completed, ran);
    EXPECT_EQ(s.cancelled, dropped);
  }
}

// A batch's calls may wait inside (help-while-wait): on one worker, each call's child runs
// while the call waits for it.
TEST(Bulk, PostNCallsMayWaitInside) {
  spool::pool pool{pool_config(1)};
  std::atomic<std::size_t> sum{0};
  pool.post_n(200, [&](std::size_t i) { sum.fetch_add(pool.submit([i] { return i; }).get()); });
  pool.wait_idle();
  EXPECT_EQ(sum.load(), 199u * 200 / 2);
}

// Calls that block (in a blocking_region) on an elastic pool get compensating threads, and
// the batch's tickets reach them: all 8 calls run at once on a pool that starts with 1.
TEST(Bulk, PostNBlockingCallsRunTogetherOnAnElasticPool) {
  spool::config cfg;
  cfg.min_threads = 1;
  cfg.max_threads = 8;
  spool::pool pool{cfg};
  std::latch all_running(8);
  pool.post_n(8, [&](std::size_t) {
    spool::blocking_region blocking;
    all_running.arrive_and_wait();  // returns only once all 8 calls run at the same time
  });
  pool.wait_idle();
  EXPECT_GE(pool.statistics().threads_started, 8u);
}

// A C API pool of `threads` workers, or null if it could not be made.
spool_pool* c_pool(unsigned threads) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = threads;
  spool_pool* pool = nullptr;
  return spool_create(&cfg, &pool) == SPOOL_OK ? pool : nullptr;
}

TEST(Bulk, CApi) {
  spool_pool* pool = c_pool(2);
  ASSERT_NE(pool, nullptr);
  std::atomic<int> slots[64] = {};
  void* args[64];
  for (int i = 0; i < 64; ++i) args[i] = &slots[i];
  std::size_t accepted = 99;
  ASSERT_EQ(spool_submit_bulk(
                pool, [](void* a) { static_cast<std::atomic<int>*>(a)->fetch_add(1); }, args, 64,
                &accepted),
            SPOOL_OK);
  EXPECT_EQ(accepted, 64u);
  ASSERT_EQ(spool_wait_idle(pool), SPOOL_OK);
  for (auto& s : slots) EXPECT_EQ(s.load(), 1);
  EXPECT_EQ(spool_submit_bulk(pool, nullptr, args, 1, &accepted), SPOOL_EINVAL);
  EXPECT_EQ(spool_submit_bulk(
                pool, [](void*) {}, nullptr, 1, &accepted),
            SPOOL_EINVAL);
  EXPECT_EQ(spool_submit_bulk(
                pool, [](void*) {}, nullptr, 0, &accepted),
            SPOOL_OK);
  ASSERT_EQ(spool_close(pool), SPOOL_OK);
  EXPECT_EQ(spool_submit_bulk(
                pool, [](void*) {}, args, 64, &accepted),
            SPOOL_ESHUTDOWN);
  EXPECT_EQ(accepted, 0u);
  ASSERT_EQ(spool_destroy(pool), SPOOL_OK);
}

// The C API's batch from outside an unbounded pool goes in whole: args is copied at
// submission (the caller may reuse its array at once), and every task runs once.
TEST(Bulk, CApiBatchCopiesArgs) {
  spool_pool* pool = c_pool(2);
  ASSERT_NE(pool, nullptr);
  std::latch started(2), release(1);
  auto hold = [](void* a) {
    auto* l = static_cast<std::pair<std::latch*, std::latch*>*>(a);
    l->first->count_down();
    l->second->wait();
  };
  std::pair<std::latch*, std::latch*> latches{&started, &release};
  ASSERT_EQ(spool_submit(pool, hold, &latches), SPOOL_OK);
  ASSERT_EQ(spool_submit(pool, hold, &latches), SPOOL_OK);
  started.wait();  // both workers are held: nothing of the batch can run yet
  constexpr std::size_t n = 10000;
  std::vector<std::atomic<int>> hits(n);
  std::vector<void*> args(n);
  for (std::size_t i = 0; i < n; ++i) args[i] = &hits[i];
  std::size_t accepted = 0;
  ASSERT_EQ(spool_submit_bulk(
                pool, [](void* a) { static_cast<std::atomic<int>*>(a)->fetch_add(1); }, args.data(),
                n, &accepted),
            SPOOL_OK);
  EXPECT_EQ(accepted, n);
  std::fill(args.begin(), args.end(), nullptr);  // the pool has its own copy
  release.count_down();
  ASSERT_EQ(spool_wait_idle(pool), SPOOL_OK);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
  ASSERT_EQ(spool_destroy(pool), SPOOL_OK);
}

}  // namespace
