// parallel_invoke, parallel_for, parallel_reduce and parallel_sort (spool/parallel.hpp): each
// against the sequential result over sizes around every threshold and many input shapes;
// reduce's operand order; exceptions; nested calls from inside tasks; one-thread pools; forks
// taken back and stolen; a pool that refuses or drops the algorithm's tasks; and a randomized
// stress of parallel_sort.
#include <gtest/gtest.h>

#include <spool/parallel.hpp>
#include <spool/spool.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using namespace spool_test;

// Sizes around the thresholds: tiny, a grain of 64, the sort's leaf (2048) and its parallel
// split (16384), and large enough for parallel splits on 4 threads. Sized for ThreadSanitizer.
// (16 and 48 are the sort's insertion sort thresholds.)
const std::vector<std::size_t> k_sizes = {0,    1,    2,    3,     15,    16,    17,   47,
                                          48,   49,   63,   64,    65,    129,   1000, 2047,
                                          2048, 2049, 5000, 16383, 16384, 16385, 70000};

// A grain this small makes a task per few indices: the larger sizes add time, not coverage.
bool worth_testing(std::size_t grain, std::size_t n) {
  return grain == 0 || grain >= 64 || n <= 5000;
}

// The exception the tests throw, distinguishable from anything the pool would throw.
struct test_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Counts the calls running now: after an algorithm returns or throws, none may be left.
struct in_flight_guard {
  explicit in_flight_guard(std::atomic<int>& n) : n_(n) { ++n_; }
  ~in_flight_guard() { --n_; }
  in_flight_guard(const in_flight_guard&) = delete;
  in_flight_guard& operator=(const in_flight_guard&) = delete;
  std::atomic<int>& n_;
};

// ---------------------------------------------------------------------------------------------
// parallel_invoke

int fib_invoke(spool::pool& p, int n) {
  if (n < 2) return n;
  int a = 0, b = 0;
  spool::parallel_invoke(
      p, [&] { a = fib_invoke(p, n - 1); }, [&] { b = fib_invoke(p, n - 2); });
  return a + b;
}

int plain_calls = 0;
void plain_function() { ++plain_calls; }

// Two to nine calls, each run exactly once, from outside and nested inside a task, on one
// thread and more; callables of every kind: lvalues, rvalues, const, mutable, a function, one
// that returns a value (discarded).
TEST(ParallelInvoke, RunsEveryCallOnce) {
  for (unsigned threads : {1u, 2u, 4u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    std::array<std::atomic<int>, 9> runs{};
    auto hit = [&](int i) { return [&runs, i] { ++runs[static_cast<std::size_t>(i)]; }; };
    auto check_and_clear = [&](int count) {
      for (int i = 0; i < 9; ++i) {
        EXPECT_EQ(runs[static_cast<std::size_t>(i)].exchange(0), i < count ? 1 : 0) << i;
      }
    };
    for (bool nested : {false, true}) {
      SCOPED_TRACE(nested);
      auto in_place = [&](auto&& body) {
        if (nested) {
          p.submit(body).get();
        } else {
          body();
        }
      };
      in_place([&] { spool::parallel_invoke(p, hit(0), hit(1)); });
      check_and_clear(2);
      in_place([&] { spool::parallel_invoke(p, hit(0), hit(1), hit(2)); });
      check_and_clear(3);
      in_place([&] {
        spool::parallel_invoke(p, hit(0), hit(1), hit(2), hit(3), hit(4), hit(5), hit(6), hit(7),
                               hit(8));
      });
      check_and_clear(9);

      const auto constant = hit(0);
      int counter = 0;
      auto mutating = [&runs, counter]() mutable {
        ++counter;
        ++runs[1];
      };
      auto returning = [&runs] { return ++runs[2]; };
      plain_calls = 0;
      in_place([&] { spool::parallel_invoke(p, constant, mutating, returning, plain_function); });
      check_and_clear(3);
      EXPECT_EQ(plain_calls, 1);
    }
    EXPECT_EQ(p.submit([&p] { return fib_invoke(p, 18); }).get(), 2584);
    EXPECT_EQ(p.statistics().failed, 0u);
  }
}

// Each fork is a task: counted as submitted and completed, on one thread taken back from the
// worker's own deque (never stolen), so wait_idle() sees a quiescent pool after the call.
TEST(ParallelInvoke, ForksAreCountedAsTasks) {
  spool::pool p{pool_config(1)};
  const int worker = get_elsewhere(p.submit([] { return spool::this_worker_index(); }));
  p.wait_idle();
  const spool::stats before = p.statistics();
  std::atomic<int> on_worker{0};
  auto here = [&] { on_worker += spool::this_worker_index() == worker; };
  get_elsewhere(p.submit([&] { spool::parallel_invoke(p, here, here, here, here); }));
  p.wait_idle();
  const spool::stats after = p.statistics();
  EXPECT_EQ(on_worker.load(), 4);
  // The outer task and three forks (four calls: the first of each split runs in place).
  EXPECT_EQ(after.submitted - before.submitted, 4u);
  EXPECT_EQ(after.completed - before.completed, 4u);
  EXPECT_EQ(after.stolen, before.stolen);
}

// A fork another worker steals: the left call waits until the right one has started on the
// other worker, so the steal is certain; the right one then waits at a gate that the test
// opens, so the forking worker finds its half gone and helps or sleeps until it finishes.
// Repeated, the gate opens before and after the forking worker has gone to sleep.
TEST(ParallelInvoke, StolenHalfIsJoined) {
  spool::pool p{pool_config(2)};
  for (int round = 0; round < stress_iterations(200); ++round) {
    std::latch right_started(1);
    gate finish;
    int left_worker = -1, right_worker = -1;
    bool right_done = false;
    std::thread opener([&] {
      right_started.wait();
      finish.open();
    });
    p.submit([&] {
       spool::parallel_invoke(
           p,
           [&] {
             left_worker = spool::this_worker_index();
             right_started.wait();
           },
           [&] {
             right_worker = spool::this_worker_index();
             right_started.count_down();
             finish.wait();
             right_done = true;
           });
       EXPECT_TRUE(right_done);  // the join saw the stolen half finish
     }).get();
    opener.join();
    ASSERT_NE(left_worker, right_worker) << "round " << round;
  }
  EXPECT_GT(p.statistics().stolen, 0u);
}

// Exceptions: from the call run in place, from a half taken back and from a stolen half; the
// first propagates once every started call has returned, and the pool stays usable.
TEST(ParallelInvoke, ExceptionsPropagateAfterEveryStartedCallReturns) {
  for (unsigned threads : {1u, 2u, 4u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    std::atomic<int> in_flight{0};
    auto thrower = [&] {
      in_flight_guard g(in_flight);
      throw test_error("call");
    };
    auto slow = [&] {
      in_flight_guard g(in_flight);
      int v = 0;
      for (int i = 0; i < 1000; ++i) v += fib_invoke(p, 8);
      EXPECT_EQ(v, 21000);
    };
    for (bool nested : {false, true}) {
      SCOPED_TRACE(nested);
      auto call = [&](auto&&... fs) {
        if (nested) {
          p.submit([&] { spool::parallel_invoke(p, fs...); }).get();
        } else {
          spool::parallel_invoke(p, fs...);
        }
      };
      EXPECT_THROW(call(thrower, slow), test_error);
      EXPECT_EQ(in_flight.load(), 0);
      EXPECT_THROW(call(slow, thrower), test_error);
      EXPECT_EQ(in_flight.load(), 0);
      EXPECT_THROW(call(thrower, thrower, slow, thrower), test_error);
      EXPECT_EQ(in_flight.load(), 0);
    }
    EXPECT_EQ(p.submit([&p] { return fib_invoke(p, 12); }).get(), 144);
  }
}

// From outside, every call runs on the pool's threads; a refused first task is reported like
// submit() and nothing runs.
TEST(ParallelInvoke, FromOutsideRunsOnWorkersOrIsRefused) {
  spool::pool p{pool_config(2)};
  std::atomic<int> outside{0}, calls{0};
  auto call = [&] {
    ++calls;
    if (spool::this_worker_index() < 0) ++outside;
  };
  spool::parallel_invoke(p, call, call, call);
  EXPECT_EQ(calls.exchange(0), 3);
  EXPECT_EQ(outside.load(), 0);
  p.close();
  EXPECT_EQ(error_code_of([&] { spool::parallel_invoke(p, call, call); }), spool::errc::shut_down);
  EXPECT_EQ(calls.load(), 0);
}

// A discarding shutdown while the left call runs: the forked half is dropped from the deque by
// the shutdown's sweep, or dropped when the worker takes it back, or taken back before the
// shutdown began; in every case it runs exactly once and the call returns.
TEST(ParallelInvoke, DiscardingShutdownStillRunsTheForkedHalf) {
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    for (int round = 0; round < stress_iterations(50); ++round) {
      spool::pool p{pool_config(threads)};
      std::latch started(1), release(1);
      std::atomic<int> right_runs{0};
      auto left = [&] {
        started.count_down();
        release.wait();
      };
      auto right = [&] { ++right_runs; };
      spool::future<void> call = p.submit([&] { spool::parallel_invoke(p, left, right); });
      started.wait();
      std::thread stopper([&] { p.shutdown(spool::shutdown_mode::discard); });
      release.count_down();
      call.get();
      stopper.join();
      ASSERT_EQ(right_runs.load(), 1) << "round " << round;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// parallel_for

TEST(ParallelFor, VisitsEveryIndexOnce) {
  for (unsigned threads : {1u, 2u, 4u}) {
    spool::pool p{pool_config(threads)};
    for (std::size_t grain : {0, 1, 3, 64}) {
      for (std::size_t n : k_sizes) {
        if (!worth_testing(grain, n)) continue;
        SCOPED_TRACE(testing::Message()
                     << "threads " << threads << " grain " << grain << " n " << n);
        std::vector<int> hits(n, 0);  // one writer per index: a second visit is a TSan race too
        spool::parallel_for(p, std::size_t{0}, n, grain, [&](std::size_t i) { ++hits[i]; });
        EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), static_cast<std::ptrdiff_t>(n));
      }
    }
  }
}

// Chunks tile the range in order with exactly `grain` indices each (the last may be shorter).
TEST(ParallelFor, ChunksAreTheGrainTiling) {
  spool::pool p{pool_config(2)};
  for (int grain : {1, 7, 64}) {
    for (int n : {1, 6, 7, 8, 63, 64, 65, 1000}) {
      SCOPED_TRACE(testing::Message() << "grain " << grain << " n " << n);
      std::mutex mu;
      std::vector<std::pair<int, int>> chunks;
      spool::parallel_for_chunks(p, 10, 10 + n, grain, [&](int lo, int hi) {
        std::lock_guard lock(mu);
        chunks.emplace_back(lo, hi);
      });
      std::sort(chunks.begin(), chunks.end());
      ASSERT_EQ(chunks.size(), static_cast<std::size_t>((n + grain - 1) / grain));
      for (std::size_t k = 0; k < chunks.size(); ++k) {
        EXPECT_EQ(chunks[k].first, 10 + static_cast<int>(k) * grain);
        EXPECT_EQ(chunks[k].second, std::min(10 + n, chunks[k].first + grain));
      }
    }
  }
}

// grain 0 chooses chunks of at most ceil(n / (8 * threads)) indices: several per thread.
TEST(ParallelFor, DefaultGrainGivesSeveralChunksPerThread) {
  spool::pool p{pool_config(2)};
  std::atomic<int> chunks{0}, longest{0};
  spool::parallel_for_chunks(p, 0, 1600, [&](int lo, int hi) {
    ++chunks;
    int seen = longest.load();
    while (hi - lo > seen && !longest.compare_exchange_weak(seen, hi - lo)) {
    }
  });
  EXPECT_EQ(chunks.load(), 16);
  EXPECT_EQ(longest.load(), 100);
}

TEST(ParallelFor, SignedAndNarrowIndexTypes) {
  spool::pool p{pool_config(2)};
  std::vector<int> hits(100, 0);
  spool::parallel_for(p, -50, 50, 7, [&](int i) { ++hits[static_cast<std::size_t>(i + 50)]; });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 100);

  // The whole span of a narrow signed type: offsets must not overflow.
  std::vector<int> narrow(255, 0);
  spool::parallel_for(p, std::int8_t{-128}, std::int8_t{127}, 10,
                      [&](std::int8_t i) { ++narrow[static_cast<std::size_t>(i + 128)]; });
  EXPECT_EQ(std::count(narrow.begin(), narrow.end(), 1), 255);

  std::atomic<int> calls{0};
  spool::parallel_for(p, 5, 5, [&](int) { ++calls; });
  spool::parallel_for(p, 5, -5, [&](int) { ++calls; });  // last < first: empty
  EXPECT_EQ(calls.load(), 0);
}

// The first exception propagates once every started call has returned; the pool stays usable.
TEST(ParallelFor, ExceptionPropagatesAfterStartedChunksFinish) {
  for (unsigned threads : {1u, 2u, 4u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    std::atomic<int> in_flight{0};
    EXPECT_THROW(spool::parallel_for(p, 0, 10000, 10,
                                     [&](int i) {
                                       in_flight_guard g(in_flight);
                                       if (i % 1000 == 999) throw test_error("index");
                                     }),
                 test_error);
    EXPECT_EQ(in_flight.load(), 0);
    std::atomic<int> after{0};
    spool::parallel_for(p, 0, 100, [&](int) { ++after; });
    EXPECT_EQ(after.load(), 100);
  }
}

// From inside a task of the same pool, nested two deep, on one thread and more.
TEST(ParallelFor, NestedInsideTasks) {
  for (unsigned threads : {1u, 2u, 4u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    std::vector<std::vector<int>> hits(40, std::vector<int>(300, 0));
    p.submit([&] {
       spool::parallel_for(p, std::size_t{0}, hits.size(), 1, [&](std::size_t row) {
         spool::parallel_for(p, std::size_t{0}, hits[row].size(), 16,
                             [&](std::size_t i) { ++hits[row][i]; });
       });
     }).get();
    for (const auto& row : hits) EXPECT_EQ(std::count(row.begin(), row.end(), 1), 300);
  }
}

// Called from outside, the work runs on the pool's threads only.
TEST(ParallelFor, FromOutsideRunsOnWorkers) {
  spool::pool p{pool_config(2)};
  std::atomic<int> outside{0};
  spool::parallel_for(p, 0, 1000, 1, [&](int) {
    if (spool::this_worker_index() < 0) ++outside;
  });
  EXPECT_EQ(outside.load(), 0);
}

// From outside, a refused first task is reported like submit(): nothing runs.
TEST(ParallelFor, RefusedFromOutsideThrowsLikeSubmit) {
  spool::pool p{pool_config(1, 1, spool::full_policy::reject)};
  std::latch started(1);
  gate release;  // after the pool: if the post() below throws, it opens before the pool drains
  hold_workers(p, started, release);
  p.post([] {});  // the queue (capacity 1) is now full
  std::atomic<int> calls{0};
  EXPECT_EQ(error_code_of([&] { spool::parallel_for(p, 0, 10, [&](int) { ++calls; }); }),
            spool::errc::full);
  release.open();
  p.wait_idle();
  EXPECT_EQ(calls.load(), 0);

  p.close();
  EXPECT_EQ(error_code_of([&] { spool::parallel_for(p, 0, 10, [&](int) { ++calls; }); }),
            spool::errc::shut_down);
  EXPECT_EQ(calls.load(), 0);
}

// A discarding shutdown while the call runs drops its queued tasks and refuses new ones; the
// threads that would have waited for them run them, so a started call still visits every index
// once, whatever the timing of the shutdown.
TEST(ParallelFor, DiscardingShutdownFinishesAStartedCall) {
  for (int round = 0; round < stress_iterations(20); ++round) {
    spool::pool p{pool_config(2)};
    std::latch started(1), release(1);
    std::vector<int> hits(2000, 0);
    bool finished = false;
    std::thread caller([&] {
      spool::parallel_for(p, 0, 2000, 1, [&](int i) {
        if (i == 0) {  // chunk 0 runs first, inline in the call's first task
          started.count_down();
          release.wait();
        }
        ++hits[static_cast<std::size_t>(i)];
      });
      finished = true;
    });
    started.wait();
    std::thread stopper([&] { p.shutdown(spool::shutdown_mode::discard); });
    release.count_down();
    caller.join();
    stopper.join();
    EXPECT_TRUE(finished);
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 2000);
  }
}

// ---------------------------------------------------------------------------------------------
// parallel_reduce

TEST(ParallelReduce, SumMatchesSequential) {
  for (unsigned threads : {1u, 2u, 4u}) {
    spool::pool p{pool_config(threads)};
    for (std::size_t grain : {0, 1, 5, 64}) {
      for (std::size_t n : k_sizes) {
        if (!worth_testing(grain, n)) continue;
        SCOPED_TRACE(testing::Message()
                     << "threads " << threads << " grain " << grain << " n " << n);
        const auto square = [](std::size_t i) { return static_cast<std::uint64_t>(i) * i; };
        std::uint64_t expected = 0;
        for (std::size_t i = 0; i < n; ++i) expected += square(i);
        EXPECT_EQ(spool::parallel_reduce(p, std::size_t{0}, n, grain, std::uint64_t{0}, square,
                                         std::plus<>{}),
                  expected);
      }
    }
  }
}

TEST(ParallelReduce, EmptyRangeGivesIdentity) {
  spool::pool p{pool_config(2)};
  EXPECT_EQ(spool::parallel_reduce(
                p, 3, 3, 7, [](int i) { return i; }, std::plus<>{}),
            7);
  EXPECT_EQ(spool::parallel_reduce(
                p, 3, 1, 7, [](int i) { return i; }, std::plus<>{}),
            7);
  EXPECT_EQ(
      spool::parallel_reduce_chunks(
          p, 0, 0, std::string("id"), [](int, int) { return std::string("x"); }, std::plus<>{}),
      "id");
}

// String concatenation is associative but not commutative: any swapped operands show.
TEST(ParallelReduce, ConcatenationKeepsOrder) {
  const auto letter = [](int i) { return std::string(1, static_cast<char>('a' + i % 26)); };
  const auto concat = [](std::string a, const std::string& b) { return std::move(a) + b; };
  for (unsigned threads : {1u, 2u, 4u}) {
    spool::pool p{pool_config(threads)};
    for (int grain : {0, 1, 3, 100}) {
      for (int n : {0, 1, 2, 3, 27, 100, 101, 5000}) {
        SCOPED_TRACE(testing::Message()
                     << "threads " << threads << " grain " << grain << " n " << n);
        std::string expected;
        for (int i = 0; i < n; ++i) expected += letter(i);
        EXPECT_EQ(spool::parallel_reduce(p, 0, n, grain, std::string(), letter, concat), expected);
        const auto chunk = [&](int lo, int hi) {
          std::string s;
          for (int i = lo; i < hi; ++i) s += letter(i);
          return s;
        };
        EXPECT_EQ(spool::parallel_reduce_chunks(p, 0, n, grain, std::string(), chunk, concat),
                  expected);
      }
    }
  }
}

// 2x2 matrix products (mod 2^64): associative, not commutative, exact.
using matrix = std::array<std::uint64_t, 4>;
matrix multiply(const matrix& a, const matrix& b) {
  return {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
          a[2] * b[1] + a[3] * b[3]};
}

TEST(ParallelReduce, MatrixProductKeepsOrder) {
  const matrix identity = {1, 0, 0, 1};
  const auto element = [](int i) {
    const auto u = static_cast<std::uint64_t>(i);
    return matrix{u % 5 + 1, u % 3, u % 7 + 2, 1};
  };
  matrix expected = identity;
  const int n = 20000;
  for (int i = 0; i < n; ++i) expected = multiply(expected, element(i));
  for (unsigned threads : {1u, 2u, 4u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    for (int grain : {0, 1, 13, 1000}) {
      EXPECT_EQ(spool::parallel_reduce(p, 0, n, grain, identity, element, multiply), expected);
    }
  }
}

// Floating-point + is not associative: the result depends on the chunks only, so an explicit
// grain gives the same bits on any pool, every time.
TEST(ParallelReduce, FloatingPointIsReproducibleForAGrain) {
  const auto term = [](int i) { return 1.0 / (1.0 + i * 0.37); };
  std::vector<double> results;
  for (unsigned threads : {1u, 2u, 4u}) {
    spool::pool p{pool_config(threads)};
    for (int run = 0; run < 3; ++run)
      results.push_back(spool::parallel_reduce(p, 0, 100000, 777, 0.0, term, std::plus<>{}));
  }
  for (double r : results) EXPECT_EQ(r, results.front());
}

TEST(ParallelReduce, ExceptionFromMapOrReducePropagates) {
  for (unsigned threads : {1u, 2u, 4u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    std::atomic<int> in_flight{0};
    const auto map = [&](int i) {
      in_flight_guard g(in_flight);
      if (i == 4321) throw test_error("map");
      return i;
    };
    EXPECT_THROW(spool::parallel_reduce(p, 0, 10000, 10, 0, map, std::plus<>{}), test_error);
    EXPECT_EQ(in_flight.load(), 0);

    const auto reduce = [&](int a, int b) {
      in_flight_guard g(in_flight);
      if (b == 9999) throw test_error("reduce");
      return a + b;
    };
    EXPECT_THROW(spool::parallel_reduce(
                     p, 0, 10000, 10, 0, [](int i) { return i; }, reduce),
                 test_error);
    EXPECT_EQ(in_flight.load(), 0);
    EXPECT_EQ(spool::parallel_reduce(
                  p, 0, 100, 0, [](int i) { return i; }, std::plus<>{}),
              4950);
  }
}

TEST(ParallelReduce, NestedInsideTasks) {
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    // Sum over rows of (sum over the row), each level a parallel_reduce.
    const long total =
        p.submit([&] {
           return spool::parallel_reduce(
               p, 0, 50, 1, 0L,
               [&](int row) {
                 return spool::parallel_reduce(
                     p, 0, 200, 8, 0L, [row](int i) { return long{row} * i; }, std::plus<>{});
               },
               std::plus<>{});
         }).get();
    EXPECT_EQ(total, 1225L * 19900L);
  }
}

// ---------------------------------------------------------------------------------------------
// parallel_sort

enum class shape {
  random,
  few_values,
  sorted,
  descending,
  all_equal,
  organ_pipe,
  sawtooth,
  zigzag
};
constexpr shape k_shapes[] = {shape::random,     shape::few_values, shape::sorted,
                              shape::descending, shape::all_equal,  shape::organ_pipe,
                              shape::sawtooth,   shape::zigzag};

std::vector<int> make_input(shape s, std::size_t n, std::mt19937& rng) {
  std::vector<int> a(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int k = static_cast<int>(i), m = static_cast<int>(n);
    switch (s) {
      case shape::random:
        a[i] = static_cast<int>(rng());
        break;
      case shape::few_values:
        a[i] = static_cast<int>(rng() % 4);
        break;
      case shape::sorted:
        a[i] = k;
        break;
      case shape::descending:
        a[i] = m - k;
        break;
      case shape::all_equal:
        a[i] = 42;
        break;
      case shape::organ_pipe:
        a[i] = std::min(k, m - k);
        break;
      case shape::sawtooth:
        a[i] = k % 1000;
        break;
      case shape::zigzag:
        a[i] = k % 2 == 0 ? k : m - k;
        break;
    }
  }
  return a;
}

// Sorts a copy with parallel_sort and one with std::sort; ints have one sorted order, so the
// two must be equal element for element.
void expect_sorts_like_std(spool::pool& p, std::vector<int> a) {
  std::vector<int> expected = a;
  std::sort(expected.begin(), expected.end());
  spool::parallel_sort(p, a.begin(), a.end());
  EXPECT_EQ(a, expected);
}

TEST(ParallelSort, MatchesStdSortForEveryShapeAndSize) {
  std::mt19937 rng(1);
  for (unsigned threads : {1u, 2u, 4u}) {
    spool::pool p{pool_config(threads)};
    for (shape s : k_shapes) {
      for (std::size_t n : k_sizes) {
        SCOPED_TRACE(testing::Message()
                     << "threads " << threads << " shape " << static_cast<int>(s) << " n " << n);
        expect_sorts_like_std(p, make_input(s, n, rng));
      }
    }
  }
}

TEST(ParallelSort, CustomComparatorAndStrings) {
  std::mt19937 rng(2);
  spool::pool p{pool_config(2)};
  for (std::size_t n : {0, 1, 2, 100, 3000, 40000}) {
    SCOPED_TRACE(n);
    std::vector<std::string> a(n);
    for (auto& s : a) s = std::to_string(rng() % 5000) + std::string(rng() % 20, 'x');
    std::vector<std::string> expected = a;
    std::sort(expected.begin(), expected.end(), std::greater<>{});
    spool::parallel_sort(p, a.begin(), a.end(), std::greater<>{});
    EXPECT_EQ(a, expected);
  }
}

// Elements that compare equal but differ: the order among them is unspecified (as for
// std::sort), so check sortedness by key and that the result is a permutation of the input.
TEST(ParallelSort, EquivalentElementsArePermuted) {
  struct item {
    int key;
    int id;
    bool operator==(const item&) const = default;
  };
  const auto sorted_by_key_and_id = [](std::vector<item> v) {
    std::sort(v.begin(), v.end(), [](const item& x, const item& y) {
      return std::pair(x.key, x.id) < std::pair(y.key, y.id);
    });
    return v;
  };
  std::mt19937 rng(3);
  spool::pool p{pool_config(2)};
  for (std::size_t n : {17, 2049, 30000}) {
    SCOPED_TRACE(n);
    std::vector<item> a(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = {static_cast<int>(rng() % 50), static_cast<int>(i)};
    const std::vector<item> input = a;
    const auto by_key = [](const item& x, const item& y) { return x.key < y.key; };
    spool::parallel_sort(p, a.begin(), a.end(), by_key);
    EXPECT_TRUE(std::is_sorted(a.begin(), a.end(), by_key));
    EXPECT_EQ(sorted_by_key_and_id(a), sorted_by_key_and_id(input));
  }
}

TEST(ParallelSort, MoveOnlyElements) {
  std::mt19937 rng(4);
  spool::pool p{pool_config(2)};
  std::vector<std::unique_ptr<int>> a;
  std::vector<int> expected;
  for (int i = 0; i < 30000; ++i) {
    const int v = static_cast<int>(rng() % 1000);
    a.push_back(std::make_unique<int>(v));
    expected.push_back(v);
  }
  std::sort(expected.begin(), expected.end());
  spool::parallel_sort(p, a.begin(), a.end(), [](const auto& x, const auto& y) { return *x < *y; });
  std::vector<int> got;
  for (const auto& x : a) got.push_back(*x);
  EXPECT_EQ(got, expected);
}

// A throwing comparator: the exception propagates after every started task finished (the
// vector and the comparator's counters are destroyed right after, so a task still running
// would be a use after free under ASan and a race under TSan). As with std::sort, the range is
// then valid but in no particular order (std::sort, which sorts the leaves, may leave an
// element moved-from), and nothing leaks.
TEST(ParallelSort, ComparatorExceptionPropagates) {
  std::mt19937 rng(5);
  for (unsigned threads : {1u, 2u, 4u}) {
    spool::pool p{pool_config(threads)};
    for (long throw_at : {1L, 1000L, 100000L}) {
      SCOPED_TRACE(testing::Message() << "threads " << threads << " throw at " << throw_at);
      auto a = std::make_unique<std::vector<std::string>>(20000);
      for (auto& s : *a) s = std::to_string(rng());
      auto calls = std::make_unique<std::atomic<long>>(0);
      auto in_flight = std::make_unique<std::atomic<int>>(0);
      const auto comp = [&](const std::string& x, const std::string& y) {
        in_flight_guard g(*in_flight);
        if (++*calls == throw_at) throw test_error("compare");
        return x < y;
      };
      EXPECT_THROW(spool::parallel_sort(p, a->begin(), a->end(), comp), test_error);
      EXPECT_EQ(in_flight->load(), 0);
      a.reset();
      calls.reset();
      in_flight.reset();
    }
    expect_sorts_like_std(p, make_input(shape::random, 50000, rng));  // still usable
  }
}

// McIlroy's adversary: a comparator that fixes the order lazily, so as to make the pivot of
// each split compare low. Items start as "gas" (above every fixed value); comparing two gas
// items fixes one of them, preferably the one that was last compared while gas (the pivot,
// for a quicksort). The answers stay consistent with one total order, so the result is
// checkable, but a quicksort without a way out is driven to ~n^2/2 comparisons.
class adversary {
 public:
  explicit adversary(int n) : value_(static_cast<std::size_t>(n), n), gas_(n) {}
  bool less(int x, int y) {
    std::lock_guard lock(mu_);  // the sort calls it from several threads
    ++comparisons_;
    if (value_of(x) == gas_ && value_of(y) == gas_) fix(x == candidate_ ? x : y);
    if (value_of(x) == gas_) {
      candidate_ = x;
    } else if (value_of(y) == gas_) {
      candidate_ = y;
    }
    return value_of(x) < value_of(y);
  }
  long comparisons() const { return comparisons_; }
  int value_of(int x) const { return value_[static_cast<std::size_t>(x)]; }

 private:
  void fix(int x) { value_[static_cast<std::size_t>(x)] = fixed_++; }
  std::mutex mu_;
  std::vector<int> value_;
  int gas_, fixed_ = 0, candidate_ = -1;
  long comparisons_ = 0;
};

// The depth budget hands a range that keeps splitting badly to std::sort: O(n log n) whatever
// the pivots. (Counted comparisons, not time: a quadratic sort would need about 2e8 here.)
TEST(ParallelSort, AdversaryStaysNLogN) {
  const int n = 20000;
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    adversary adv(n);
    std::vector<int> items(n);
    std::iota(items.begin(), items.end(), 0);
    spool::parallel_sort(p, items.begin(), items.end(),
                         [&](int x, int y) { return adv.less(x, y); });
    const double n_log_n = n * std::log2(static_cast<double>(n));
    EXPECT_LT(static_cast<double>(adv.comparisons()), 8 * n_log_n);  // about 5.2 here
    for (std::size_t i = 1; i < items.size(); ++i)
      EXPECT_FALSE(adv.less(items[i], items[i - 1])) << "at " << i;
  }
}

// Nested: several sorts at once, each inside a task of the same pool, on one thread and more.
TEST(ParallelSort, NestedInsideTasks) {
  std::mt19937 rng(6);
  for (unsigned threads : {1u, 2u, 4u}) {
    SCOPED_TRACE(threads);
    spool::pool p{pool_config(threads)};
    std::vector<std::vector<int>> inputs;
    for (shape s : k_shapes) inputs.push_back(make_input(s, 30000, rng));
    std::vector<std::vector<int>> expected = inputs;
    for (auto& e : expected) std::sort(e.begin(), e.end());
    p.submit([&] {
       spool::parallel_for(p, std::size_t{0}, inputs.size(), 1, [&](std::size_t k) {
         spool::parallel_sort(p, inputs[k].begin(), inputs[k].end());
       });
     }).get();
    EXPECT_EQ(inputs, expected);
  }
}

// Two threads outside the pool sort at the same time on it.
TEST(ParallelSort, ConcurrentCallersFromOutside) {
  std::mt19937 rng(7);
  spool::pool p{pool_config(2)};
  std::vector<int> a = make_input(shape::random, 60000, rng);
  std::vector<int> b = make_input(shape::descending, 60000, rng);
  std::vector<int> ea = a, eb = b;
  std::sort(ea.begin(), ea.end());
  std::sort(eb.begin(), eb.end());
  std::thread other([&] { spool::parallel_sort(p, b.begin(), b.end()); });
  spool::parallel_sort(p, a.begin(), a.end());
  other.join();
  EXPECT_EQ(a, ea);
  EXPECT_EQ(b, eb);
}

// As for parallel_for: a discarding shutdown in the middle of a sort (the first comparison
// waits for it to start) refuses and drops the sort's tasks, parallel split helpers included;
// the sort still finishes, and sorts.
TEST(ParallelSort, DiscardingShutdownFinishesAStartedCall) {
  std::mt19937 rng(9);
  for (int round = 0; round < stress_iterations(10); ++round) {
    spool::pool p{pool_config(2)};
    std::vector<int> a = make_input(shape::random, 100000, rng), expected = a;
    std::sort(expected.begin(), expected.end());
    std::latch started(1), release(1);
    std::atomic<bool> first{true};
    const auto comp = [&](int x, int y) {
      if (first.exchange(false)) {
        started.count_down();
        release.wait();
      }
      return x < y;
    };
    std::thread caller([&] { spool::parallel_sort(p, a.begin(), a.end(), comp); });
    started.wait();
    std::thread stopper([&] { p.shutdown(spool::shutdown_mode::discard); });
    release.count_down();
    caller.join();
    stopper.join();
    EXPECT_EQ(a, expected);
  }
}

// Random sizes (skewed small, up to 150k), shapes and pools, each against std::sort.
TEST(ParallelSort, RandomizedStress) {
  std::mt19937 rng(8);
  std::vector<std::unique_ptr<spool::pool>> pools;
  for (unsigned threads : {1u, 2u, 3u, 4u})
    pools.push_back(std::make_unique<spool::pool>(pool_config(threads)));
  for (int round = 0; round < stress_iterations(120); ++round) {
    const std::size_t n = rng() % 4 == 0 ? rng() % 150000 : rng() % 5000;
    const shape s = k_shapes[rng() % std::size(k_shapes)];
    spool::pool& p = *pools[rng() % pools.size()];
    SCOPED_TRACE(testing::Message() << "round " << round << " threads " << p.thread_count()
                                    << " shape " << static_cast<int>(s) << " n " << n);
    expect_sorts_like_std(p, make_input(s, n, rng));
  }
}

}  // namespace
