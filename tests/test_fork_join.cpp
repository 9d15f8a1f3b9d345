// Nested fork/join: tasks that submit tasks and wait for them. A worker waiting on a future runs
// other tasks meanwhile (help while waiting), so this finishes even on a one-thread pool; and a
// worker's submissions bypass the bounded queue, so a tiny capacity cannot deadlock it.
#include <gtest/gtest.h>

#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <utility>
#include <vector>

#include "support.hpp"

namespace {

using namespace spool_test;

// fib(n) submits fib(n-1), computes fib(n-2) itself, and waits for the submitted half with get().
int fib(spool::pool& p, int n) {
  if (n < 2) return n;
  spool::future<int> left = p.submit([&p, n] { return fib(p, n - 1); });
  int right = fib(p, n - 2);
  return left.get() + right;
}

constexpr std::size_t cutoff = 1000;

// 1,000,000 .. 1: the input the tpool README sorts (descending).
std::vector<int> descending(std::size_t n) {
  std::vector<int> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<int>(n - i);
  return a;
}

// Splits [first, last) around a median-of-three pivot into < pivot, == pivot, > pivot and
// returns the bounds of the middle part, which is already in its final place.
std::pair<int*, int*> partition3(int* first, int* last) {
  int a = *first, b = first[(last - first) / 2], c = *(last - 1);
  int pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));
  int* lt = std::partition(first, last, [pivot](int x) { return x < pivot; });
  int* gt = std::partition(lt, last, [pivot](int x) { return x == pivot; });
  return {lt, gt};
}

// Sorts the left part in a submitted task and the right part here, then waits with get().
void quicksort_join(spool::pool& p, int* first, int* last) {
  if (static_cast<std::size_t>(last - first) <= cutoff) {
    std::sort(first, last);
    return;
  }
  auto [lt, gt] = partition3(first, last);
  spool::future<void> left = p.submit([&p, first, lt = lt] { quicksort_join(p, first, lt); });
  quicksort_join(p, gt, last);
  left.get();
}

// Posts both parts as tasks and returns; `placed` counts elements in their final place.
void quicksort_post(spool::pool& p, int* first, int* last, std::atomic<std::size_t>& placed) {
  const auto n = static_cast<std::size_t>(last - first);
  if (n <= cutoff) {
    std::sort(first, last);
    placed += n;
    return;
  }
  auto [lt, gt] = partition3(first, last);
  placed += static_cast<std::size_t>(gt - lt);
  p.post([&p, first, lt = lt, &placed] { quicksort_post(p, first, lt, placed); });
  p.post([&p, gt = gt, last, &placed] { quicksort_post(p, gt, last, placed); });
}

}  // namespace

TEST(ForkJoin, FibOnOneThread) {
  spool::pool p{pool_config(1)};
  EXPECT_EQ(p.submit([&p] { return fib(p, 20); }).get(), 6765);
}

TEST(ForkJoin, FibOnTwoThreads) {
  spool::pool p{pool_config(2)};
  EXPECT_EQ(p.submit([&p] { return fib(p, 20); }).get(), 6765);
}

TEST(ForkJoin, FibOnFourThreads) {
  spool::pool p{pool_config(4)};
  EXPECT_EQ(p.submit([&p] { return fib(p, 20); }).get(), 6765);
}

// The waits nest inside the tasks of a bounded pool: capacity 1 only limits outside callers.
TEST(ForkJoin, FibThroughCapacityOne) {
  spool::pool p{pool_config(2, 1)};
  EXPECT_EQ(p.submit([&p] { return fib(p, 18); }).get(), 2584);
}

TEST(ForkJoin, QuicksortSubmitGetOnOneThread) {
  std::vector<int> a = descending(1'000'000);
  spool::pool p{pool_config(1)};
  p.submit([&] { quicksort_join(p, a.data(), a.data() + a.size()); }).get();
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(a.front(), 1);
  EXPECT_EQ(a.back(), 1'000'000);
}

// tpool's deadlocking case: every partition above the cutoff is posted, with no depth limit,
// through a queue of capacity 2; wait_idle() from outside waits for the whole tree.
TEST(ForkJoin, QuicksortPostThroughCapacityTwo) {
  for (unsigned threads : {1u, 2u, 4u}) {
    SCOPED_TRACE(threads);
    std::vector<int> a = descending(1'000'000);
    std::atomic<std::size_t> placed{0};
    spool::pool p{pool_config(threads, 2)};
    p.post([&] { quicksort_post(p, a.data(), a.data() + a.size(), placed); });
    p.wait_idle();
    EXPECT_EQ(placed, a.size());
    EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
    EXPECT_EQ(a.front(), 1);
    EXPECT_EQ(a.back(), 1'000'000);
  }
}
