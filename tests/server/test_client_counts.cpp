// shared_client_counts (server/limits/client_limits.hpp), the per-client connection counts
// preforked's workers share: the limit under concurrent opens and closes of one client, a
// full table, and the counts a dead holder gives back. Threads stand in for the processes:
// the table is the same atomics either way.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "limits/client_limits.hpp"

namespace {

using spoold::client_key;
using spoold::shared_client_counts;
using opened = shared_client_counts::opened;

client_key key(std::uint64_t n) { return client_key{0, n}; }

TEST(SharedClientCounts, LimitHoldsPerClient) {
  shared_client_counts counts(0);
  EXPECT_EQ(counts.open(key(1), 2, -1), opened::counted);
  EXPECT_EQ(counts.open(key(1), 2, -1), opened::counted);
  EXPECT_EQ(counts.open(key(1), 2, -1), opened::refused);
  EXPECT_EQ(counts.open(key(2), 2, -1), opened::counted);  // another client
  EXPECT_EQ(counts.count(key(1)), 2u);
  counts.close(key(1), -1);
  EXPECT_EQ(counts.open(key(1), 2, -1), opened::counted);
  counts.close(key(1), -1);
  counts.close(key(1), -1);
  counts.close(key(2), -1);
  EXPECT_EQ(counts.count(key(1)), 0u);
  EXPECT_EQ(counts.count(key(2)), 0u);
}

// Threads open and close connections of the same few clients as fast as they can: no client
// ever holds more than the limit, and every count returns to zero.
TEST(SharedClientCounts, ConcurrentOpensNeverPassTheLimit) {
  constexpr std::size_t limit = 3;
  constexpr int clients = 4;
  constexpr int threads = 8;
  constexpr int rounds = 20000;
  shared_client_counts counts(0);
  std::atomic<int> held[clients] = {};
  std::atomic<bool> over{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        const int c = (i + t) % clients;
        if (counts.open(key(100 + c), limit, -1) != opened::counted) continue;
        if (held[c].fetch_add(1) + 1 > static_cast<int>(limit)) over = true;
        held[c].fetch_sub(1);
        counts.close(key(100 + c), -1);
      }
    });
  }
  for (std::thread& th : pool) th.join();
  EXPECT_FALSE(over.load());
  for (int c = 0; c < clients; ++c) EXPECT_EQ(counts.count(key(100 + c)), 0u);
}

// More clients with a connection open than slots: the ones that find their window full are
// let in uncounted (never refused), and closing the counted ones empties the table.
TEST(SharedClientCounts, FullTableLetsClientsInUncounted) {
  shared_client_counts counts(0);
  const std::size_t n = shared_client_counts::slot_count + 4096;
  std::vector<opened> got(n);
  std::size_t uncounted = 0;
  for (std::size_t i = 0; i < n; ++i) {
    got[i] = counts.open(key(1'000'000 + i), 1, -1);
    ASSERT_NE(got[i], opened::refused) << i;
    if (got[i] == opened::uncounted) ++uncounted;
  }
  EXPECT_GE(uncounted, n - shared_client_counts::slot_count);
  for (std::size_t i = 0; i < n; ++i) {
    if (got[i] == opened::counted) counts.close(key(1'000'000 + i), -1);
  }
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(counts.count(key(1'000'000 + i)), 0u) << i;
  // Emptied slots are taken again.
  EXPECT_EQ(counts.open(key(5), 1, -1), opened::counted);
}

TEST(SharedClientCounts, DeadHolderGivesItsCountBack) {
  shared_client_counts counts(2);
  ASSERT_EQ(counts.open(key(7), 1, 1), opened::counted);
  EXPECT_EQ(counts.open(key(7), 1, 0), opened::refused);
  counts.release_holder(1);  // the holder died without closing
  EXPECT_EQ(counts.count(key(7)), 0u);
  EXPECT_EQ(counts.open(key(7), 1, 0), opened::counted);
  // A holder that closed holds nothing: releasing it again takes nothing from the others.
  counts.close(key(7), 0);
  ASSERT_EQ(counts.open(key(7), 2, 1), opened::counted);
  counts.release_holder(0);
  EXPECT_EQ(counts.count(key(7)), 1u);
  counts.release_holder(1);
  EXPECT_EQ(counts.count(key(7)), 0u);
}

}  // namespace
