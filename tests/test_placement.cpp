// Placement: config::affinity pins each worker to its CPU (checked from inside tasks with
// sched_getcpu and pthread_getaffinity_np), bad CPU ids are refused, and the steal order puts
// near victims first (on a synthetic topology with known answers, and on this machine's).
// Works with any number of CPUs, one included.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "placement/topology.hpp"
#include "support.hpp"

namespace {

using spool::detail::distance;
using spool::detail::place;
using spool::detail::victim_order;
using spool_test::error_code_of;

struct seen_cpu {
  int cpu;                    // sched_getcpu()
  std::vector<unsigned> set;  // pthread_getaffinity_np
};

std::vector<unsigned> affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return cpus;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TEST(Affinity, WorkersRunOnTheirAssignedCpus) {
  const std::vector<unsigned> cpus = spool::allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  // More workers than CPUs: the list is used round-robin. Reversed, so that worker i's CPU is
  // not simply the i-th allowed one.
  std::vector<unsigned> order(cpus.rbegin(), cpus.rend());
  const unsigned threads = static_cast<unsigned>(cpus.size()) + 1;
  spool::config cfg = spool_test::pool_config(threads);
  cfg.affinity = order;
  std::mutex mu;
  std::map<int, seen_cpu> seen;  // worker index -> what its task saw
  spool::pool pool{cfg};
  std::barrier all(threads);  // one task per worker at once
  for (unsigned i = 0; i < threads; ++i) {
    pool.post([&] {
      seen_cpu s{sched_getcpu(), affinity_of_this_thread()};
      {
        std::lock_guard lock(mu);
        seen[spool::this_worker_index()] = s;
      }
      all.arrive_and_wait();
    });
  }
  pool.wait_idle();
  ASSERT_EQ(seen.size(), threads);
  for (const auto& [index, s] : seen) {
    const unsigned want = order[static_cast<std::size_t>(index) % order.size()];
    EXPECT_EQ(s.set, std::vector<unsigned>{want}) << "worker " << index;
    EXPECT_EQ(s.cpu, static_cast<int>(want)) << "worker " << index;
  }
}

TEST(Affinity, RefusesCpusThisProcessMayNotUse) {
  spool::config cfg = spool_test::pool_config(1);
  cfg.affinity = {CPU_SETSIZE + 3};
  EXPECT_EQ(error_code_of([&] { spool::pool p{cfg}; }), spool::errc::invalid_argument);
  const std::vector<unsigned> cpus = spool::allowed_cpus();
  const unsigned outside = cpus.back() + 1;  // above every allowed id
  if (outside < CPU_SETSIZE) {
    cfg.affinity = {cpus.front(), outside};
    EXPECT_EQ(error_code_of([&] { spool::pool p{cfg}; }), spool::errc::invalid_argument);
  }
}

TEST(Affinity, PinnedPoolRunsForkJoinWorkToCompletion) {
  // Recursive submissions make the workers steal from each other (the nearest-first walk when
  // the topology is known).
  spool::config cfg = spool_test::pool_config(4);
  cfg.affinity = spool::allowed_cpus();
  spool::pool pool{cfg};
  std::atomic<long> leaves{0};
  struct fib {
    static long run(spool::pool& p, int n, std::atomic<long>& leaves) {
      if (n < 2) {
        leaves.fetch_add(1, std::memory_order_relaxed);
        return n;
      }
      auto left = p.submit([&p, n, &leaves] { return run(p, n - 1, leaves); });
      const long right = run(p, n - 2, leaves);
      return left.get() + right;
    }
  };
  EXPECT_EQ(pool.submit([&] { return fib::run(pool, 18, leaves); }).get(), 2584);
  EXPECT_EQ(leaves.load(), 4181);
}

// 16 CPUs: two NUMA nodes of two L3 caches of two cores of two hardware threads.
std::vector<place> synthetic() {
  std::vector<place> topo(16);
  for (int c = 0; c < 16; ++c) topo[c] = place{c / 2, c / 4, c / 8};
  return topo;
}

void expect_nearest_first(std::size_t self, const std::vector<std::size_t>& order,
                          const std::vector<place>& places, std::size_t n) {
  ASSERT_EQ(order.size(), n - 1);
  std::vector<std::size_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0, v = 0; i < sorted.size(); ++i, ++v) {
    if (v == self) ++v;
    EXPECT_EQ(sorted[i], v);  // every other worker exactly once
  }
  for (std::size_t i = 1; i < order.size(); ++i) {
    EXPECT_LE(distance(places[self], places[order[i - 1]]),
              distance(places[self], places[order[i]]));
  }
}

TEST(StealOrder, SyntheticTopologyNearestFirst) {
  const std::vector<place> topo = synthetic();
  std::vector<unsigned> cpus(16);
  for (unsigned c = 0; c < 16; ++c) cpus[c] = c;
  const std::vector<place> places = spool::detail::worker_places(cpus, topo, 16);
  ASSERT_EQ(places.size(), 16u);
  // Worker 0: its core's sibling, then its cache, then its node, then the rest.
  EXPECT_EQ(victim_order(0, 16, places, 0),
            (std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  // Worker 13 from a start of 14: the same groups, each rotated to begin at 14.
  EXPECT_EQ(victim_order(13, 16, places, 14),
            (std::vector<std::size_t>{12, 14, 15, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7}));
  for (std::size_t self = 0; self < 16; ++self) {
    for (std::size_t start = 0; start < 16; start += 5) {
      expect_nearest_first(self, victim_order(self, 16, places, start), places, 16);
    }
  }
  // Fewer slots created than places: only those are visited.
  EXPECT_EQ(victim_order(2, 5, places, 0), (std::vector<std::size_t>{3, 0, 1, 4}));
}

TEST(StealOrder, WorkersShareCpusRoundRobin) {
  const std::vector<place> topo = synthetic();
  // Six workers on CPUs 0, 2, 8: workers 0 and 3 share CPU 0 (the same core), 1 and 4 share
  // CPU 2 (0's cache), 2 and 5 share CPU 8 (the other node).
  const std::vector<unsigned> cpus{0, 2, 8};
  const std::vector<place> places = spool::detail::worker_places(cpus, topo, 6);
  EXPECT_EQ(victim_order(0, 6, places, 0), (std::vector<std::size_t>{3, 1, 4, 2, 5}));
  EXPECT_EQ(victim_order(5, 6, places, 0), (std::vector<std::size_t>{2, 0, 1, 3, 4}));
}

TEST(StealOrder, UnknownPlacesAreAllFar) {
  const std::vector<place> places(5);  // every id -1: nothing matches
  EXPECT_EQ(victim_order(1, 5, places, 3), (std::vector<std::size_t>{3, 4, 0, 2}));
  EXPECT_TRUE(spool::detail::worker_places({}, synthetic(), 4).empty());
  const std::vector<unsigned> cpus{0};
  EXPECT_TRUE(spool::detail::worker_places(cpus, {}, 4).empty());
}

TEST(StealOrder, ThisMachinesTopology) {
  const std::vector<place> topo = spool::detail::read_topology();
  const std::vector<unsigned> cpus = spool::allowed_cpus();
  if (!spool::topology_aware()) {
    EXPECT_TRUE(topo.empty());  // the fallback: no places, the flat search
    return;
  }
  ASSERT_FALSE(topo.empty());
  for (unsigned c : cpus) {
    ASSERT_LT(c, topo.size());
    EXPECT_GE(topo[c].core, 0) << "CPU " << c;
  }
  const std::size_t n = cpus.size() * 2;
  const std::vector<place> places = spool::detail::worker_places(cpus, topo, n);
  ASSERT_EQ(places.size(), n);
  for (std::size_t self = 0; self < n; ++self) {
    const auto order = victim_order(self, n, places, self);
    expect_nearest_first(self, order, places, n);
    // The worker on self's CPU (self +- cpus.size()) shares its core: nothing comes before it.
    const std::size_t twin = (self + cpus.size()) % n;
    EXPECT_EQ(distance(places[self], places[twin]), 0u);
    EXPECT_EQ(distance(places[self], places[order.front()]), 0u) << "worker " << self;
  }
}

}  // namespace
