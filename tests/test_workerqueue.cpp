// The unit tests from the WorkerQueue post
// (../shared/seeds/workerqueue-performance-experiments.txt), adapted: the queue's consumer
// threads are the pool's workers, Add(i) is post(), and the post's busy-wait loops are latches.
#include <gtest/gtest.h>

#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <latch>
#include <mutex>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using namespace spool_test;

// Posts 1..1000 to a pool of `threads` workers that add them up; the sum is 500500.
int sum_through(unsigned threads) {
  std::atomic<int> sum{0};
  {
    spool::pool p{pool_config(threads)};
    for (int i = 1; i <= 1000; ++i) p.post([&sum, i] { sum += i; });
  }  // the destructor drains
  return sum;
}

}  // namespace

// One consumer receives the items in the order they were added.
TEST(WorkerQueue, OneThreadKeepsOrder) {
  std::vector<int> received;  // only the single worker writes it
  {
    spool::pool p{pool_config(1)};
    for (int i = 0; i < 1000; ++i) p.post([&received, i] { received.push_back(i); });
  }
  ASSERT_EQ(received.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(received[i], i);
}

TEST(WorkerQueue, TwoThreads) { EXPECT_EQ(sum_through(2), 500500); }

TEST(WorkerQueue, FourThreads) { EXPECT_EQ(sum_through(4), 500500); }

// Two consumers, one stuck in its first item: the other still receives every remaining item,
// in the order they were added. (Whichever worker starts first is the one that blocks.)
TEST(WorkerQueue, TwoThreadsOneBlocked) {
  std::latch blocked{1}, all_received{1000};
  std::atomic<bool> first{true};
  std::atomic<int> blocked_item{-1}, blocked_worker{-1};
  std::mutex mu;
  std::vector<int> received;
  std::vector<int> receivers;
  spool::pool p{pool_config(2)};
  gate block;  // after the pool: an early return opens it before the pool drains
  for (int i = 0; i <= 1000; ++i) {
    p.post([&, i] {
      if (first.exchange(false)) {
        blocked_item = i;
        blocked_worker = spool::this_worker_index();
        blocked.count_down();
        block.wait();
        return;
      }
      {
        std::lock_guard lock(mu);
        received.push_back(i);
        receivers.push_back(spool::this_worker_index());
      }
      all_received.count_down();
    });
  }
  all_received.wait();  // the blocked worker is still blocked here
  blocked.wait();       // and has recorded which item and worker it is
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(received.size(), 1000u);
    EXPECT_TRUE(std::is_sorted(received.begin(), received.end()));
    EXPECT_EQ(std::adjacent_find(received.begin(), received.end()), received.end());
    EXPECT_EQ(std::find(received.begin(), received.end(), blocked_item.load()), received.end());
    EXPECT_EQ(std::count(receivers.begin(), receivers.end(), blocked_worker.load()), 0);
  }
  block.open();
  p.wait_idle();
}

// Two consumers, both stuck in their first item: nothing else runs until they are released,
// then everything does.
TEST(WorkerQueue, TwoThreadsBothBlocked) {
  std::latch block{1}, both_blocked{2};
  std::atomic<int> started{0};
  std::atomic<int> sum{0};
  spool::pool p{pool_config(2)};
  for (int i = 1; i <= 1000; ++i) {
    p.post([&, i] {
      sum += i;
      if (started.fetch_add(1) < 2) {
        both_blocked.count_down();
        block.wait();
      }
    });
  }
  both_blocked.wait();
  EXPECT_EQ(started, 2);  // with both workers stuck no third item can start
  EXPECT_EQ(p.statistics().threads_busy, 2u);
  EXPECT_EQ(p.statistics().queued, 998u);
  block.count_down();
  p.wait_idle();
  EXPECT_EQ(started, 1000);
  EXPECT_EQ(sum, 500500);
}

// Four consumers, three stuck in their first items: the fourth receives every other item, in
// the order they were added. A worker takes a producer's tasks a run at a time (up to 32,
// src/queues/stolen_batch.hpp); a run held by a worker that then blocks must still go to the free
// worker first, oldest first, before anything newer. Repeated, so that the blocked workers
// are caught holding runs of different lengths.
TEST(WorkerQueue, FourThreadsThreeBlockedKeepOrder) {
  const int rounds = stress_iterations(20);
  for (int round = 0; round < rounds; ++round) {
    constexpr int items = 3000;
    std::latch three_blocked{3}, all_received{items - 3};
    std::atomic<int> started{0};
    std::mutex mu;
    std::vector<int> received;
    std::vector<int> blocked_items;
    spool::pool p{pool_config(4)};
    gate block;  // after the pool: an early return opens it before the pool drains
    for (int i = 0; i < items; ++i) {
      p.post([&, i] {
        if (started.fetch_add(1) < 3) {
          {
            std::lock_guard lock(mu);
            blocked_items.push_back(i);
          }
          three_blocked.count_down();
          block.wait();
          return;
        }
        {
          std::lock_guard lock(mu);
          received.push_back(i);
        }
        all_received.count_down();
      });
    }
    // The free worker can receive its last item before the third blocker has recorded its
    // own, so both latches are waited for.
    all_received.wait();
    three_blocked.wait();
    {
      std::lock_guard lock(mu);
      ASSERT_EQ(received.size(), static_cast<std::size_t>(items - 3));
      EXPECT_TRUE(std::is_sorted(received.begin(), received.end())) << "round " << round;
      ASSERT_EQ(blocked_items.size(), 3u);
      for (int b : blocked_items) {
        EXPECT_EQ(std::find(received.begin(), received.end(), b), received.end());
      }
    }
    block.open();
    p.wait_idle();
  }
}
