// Bulk submission: post_bulk / post_n / spool_submit_bulk run every accepted task exactly once,
// in order on one worker, from outside the pool and from inside it, and stop cleanly at a
// full queue or a closed pool, leaving the rest unrun and counted as rejected.
#include <gtest/gtest.h>

#include <spool/spool.h>
#include <spool/spool.hpp>

#include <atomic>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>
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
  EXPECT_EQ(spool_test::error_code_of([&] { pool.post_n(3, [](std::size_t) {}); }), spool::errc::full);
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

TEST(Bulk, CApi) {
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 2;
  spool_pool* pool = nullptr;
  ASSERT_EQ(spool_create(&cfg, &pool), SPOOL_OK);
  std::atomic<int> slots[64] = {};
  void* args[64];
  for (int i = 0; i < 64; ++i) args[i] = &slots[i];
  std::size_t accepted = 99;
  ASSERT_EQ(spool_submit_bulk(pool, [](void* a) { static_cast<std::atomic<int>*>(a)->fetch_add(1); },
                              args, 64, &accepted),
            SPOOL_OK);
  EXPECT_EQ(accepted, 64u);
  ASSERT_EQ(spool_wait_idle(pool), SPOOL_OK);
  for (auto& s : slots) EXPECT_EQ(s.load(), 1);
  EXPECT_EQ(spool_submit_bulk(pool, nullptr, args, 1, &accepted), SPOOL_EINVAL);
  EXPECT_EQ(spool_submit_bulk(pool, [](void*) {}, nullptr, 1, &accepted), SPOOL_EINVAL);
  EXPECT_EQ(spool_submit_bulk(pool, [](void*) {}, nullptr, 0, &accepted), SPOOL_OK);
  ASSERT_EQ(spool_close(pool), SPOOL_OK);
  EXPECT_EQ(spool_submit_bulk(pool, [](void*) {}, args, 64, &accepted), SPOOL_ESHUTDOWN);
  EXPECT_EQ(accepted, 0u);
  ASSERT_EQ(spool_destroy(pool), SPOOL_OK);
}

}  // namespace
