// Coroutines: spool::task, spool::start, spool::schedule, co_await on futures.
#include <spool/coro.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using spool_test::pool_config;

std::int64_t serial_fib(int n) { return n < 2 ? n : serial_fib(n - 1) + serial_fib(n - 2); }

// Each level awaits two children: fib(n-1) started on the pool (it may run on another
// worker meanwhile) and fib(n-2) awaited directly.
spool::task<std::int64_t> fib(spool::pool& p, int n) {
  if (n < 2) co_return n;
  spool::future<std::int64_t> left = spool::start(p, fib(p, n - 1));
  std::int64_t right = co_await fib(p, n - 2);
  co_return co_await std::move(left) + right;
}

TEST(Coro, RecursiveFib) {
  spool::pool p(pool_config(2));
  EXPECT_EQ(spool::start(p, fib(p, 18)).get(), serial_fib(18));
}

spool::task<int> on_pool(spool::pool& p, std::atomic<bool>& was_worker) {
  co_await spool::schedule(p);
  was_worker = p.is_worker();
  co_return 7;
}

TEST(Coro, ScheduleResumesOnAWorker) {
  spool::pool p(pool_config(2));
  std::atomic<bool> was_worker{false};
  EXPECT_EQ(spool::start(p, on_pool(p, was_worker)).get(), 7);
  EXPECT_TRUE(was_worker.load());
}

spool::task<void> after_close(spool::pool& p) { co_await spool::schedule(p); }

TEST(Coro, ScheduleOnAClosedPoolThrows) {
  spool::pool p(pool_config(1));
  spool::pool other(pool_config(1));
  other.shutdown();
  auto f = spool::start(p, after_close(other));
  EXPECT_EQ(spool_test::error_code_of([&] { f.get(); }), spool::errc::shut_down);
  EXPECT_EQ(spool_test::error_code_of([&] { (void)spool::start(other, after_close(other)); }),
            spool::errc::shut_down);
}

spool::task<int> throws_inner() {
  throw std::runtime_error("inner");
  co_return 0;
}
spool::task<int> catches_outer() {
  try {
    co_return co_await throws_inner();
  } catch (const std::runtime_error&) {
    co_return -1;
  }
}
spool::task<int> rethrows_outer() { co_return co_await throws_inner() + 1; }

TEST(Coro, ExceptionsPassThroughCoAwait) {
  spool::pool p(pool_config(2));
  EXPECT_EQ(spool::start(p, catches_outer()).get(), -1);
  EXPECT_THROW(spool::start(p, rethrows_outer()).get(), std::runtime_error);
}

spool::task<int> awaits_failed(spool::pool& p) {
  co_return co_await p.submit([]() -> int { throw std::logic_error("from a future"); });
}

TEST(Coro, FailedFutureRethrowsFromCoAwait) {
  spool::pool p(pool_config(2));
  EXPECT_THROW(spool::start(p, awaits_failed(p)).get(), std::logic_error);
}

spool::task<std::size_t> reads_shared(spool::shared_future<std::string> sf) {
  const std::string& s = co_await sf;
  co_return s.size();
}

TEST(Coro, AwaitSharedFuture) {
  spool::pool p(pool_config(2));
  spool::promise<std::string> pr(p);
  spool::shared_future<std::string> sf = pr.get_future().share();
  std::vector<spool::future<std::size_t>> readers;
  for (int i = 0; i < 50; ++i) readers.push_back(spool::start(p, reads_shared(sf)));
  pr.set_value("hello");
  for (auto& r : readers) EXPECT_EQ(r.get(), 5u);
}

spool::task<long> depth(int n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await depth(n - 1);
}
spool::task<int> one() { co_return 1; }
spool::task<long> many_sequential(int n) {
  long sum = 0;
  for (int i = 0; i < n; ++i) sum += co_await one();
  co_return sum;
}

// Nested and sequential awaits of tasks that finish at once: with symmetric transfer neither
// grows the worker's stack, so both finish (a stack-growing resume would overflow it).
TEST(Coro, DeepAwaitChainsDoNotGrowTheStack) {
  spool::pool p(pool_config(1));
  EXPECT_EQ(spool::start(p, depth(100000)).get(), 100000);
  EXPECT_EQ(spool::start(p, many_sequential(1000000)).get(), 1000000);
}

TEST(Coro, BadInput) {
  spool::pool p(pool_config(1));
  spool::task<int> empty;
  EXPECT_EQ(spool_test::error_code_of([&] { (void)spool::start(p, std::move(empty)); }),
            spool::errc::invalid_argument);
  spool::future<int> none;
  auto awaits_empty = [](spool::future<int>& f) -> spool::task<int> { co_return co_await f; };
  EXPECT_EQ(spool_test::error_code_of([&] { spool::start(p, awaits_empty(none)).get(); }),
            spool::errc::invalid_argument);
}

TEST(Coro, UnstartedTaskIsFreed) {
  std::atomic<int> released{0};
  {
    auto t = [](spool_test::release_counter) -> spool::task<void> {
      co_return;
    }(spool_test::release_counter(released));
    (void)t;
  }
  EXPECT_EQ(released.load(), 1);
}

// What each coroutine of the fan-outs awaits: a delayed task's future, due 0.1 to 1.1 ms
// after its submission, so most coroutines suspend before their task has run.
spool::future<int> later(spool::pool& p, int i) {
  return p.submit_after(std::chrono::microseconds(100 + i % 1000), [i] { return i; });
}

spool::task<long> await_one(spool::future<int> f) { co_return co_await std::move(f); }

TEST(CoroStress, FanOutOfCoroutinesAwaitingFutures) {
  spool::pool p(pool_config(2));
  const int n = stress_iterations(100000);
  std::vector<spool::future<long>> done;
  done.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) done.push_back(spool::start(p, await_one(later(p, i))));
  long long sum = 0;
  for (auto& d : done) sum += d.get();
  EXPECT_EQ(sum, static_cast<long long>(n) * (n - 1) / 2);
}

spool::task<long> count_then_await(spool::future<int> f, std::atomic<int>& suspended,
                                   std::latch& all_suspended) {
  ++suspended;
  all_suspended.count_down();
  co_return co_await std::move(f);
}

// Two workers, n coroutines that each wait on a future nobody completes until all n have
// reached their co_await. That point is reached only if a waiting coroutine holds no worker:
// a blocking wait would pin both workers after two coroutines and the latch would never open.
TEST(CoroStress, WaitingCoroutinesBlockNoWorker) {
  spool::pool p(pool_config(2));
  const int n = stress_iterations(100000);
  std::vector<spool::promise<int>> promises;
  promises.reserve(static_cast<std::size_t>(n));
  std::vector<spool::future<long>> done;
  done.reserve(static_cast<std::size_t>(n));
  std::atomic<int> suspended{0};
  std::latch all_suspended(n);
  for (int i = 0; i < n; ++i) {
    promises.emplace_back(p);
    done.push_back(
        spool::start(p, count_then_await(promises.back().get_future(), suspended, all_suspended)));
  }
  all_suspended.wait();
  EXPECT_EQ(suspended.load(), n);
  for (int i = 0; i < n; ++i) promises[static_cast<std::size_t>(i)].set_value(i);
  long long sum = 0;
  for (auto& d : done) sum += d.get();
  EXPECT_EQ(sum, static_cast<long long>(n) * (n - 1) / 2);
}

}  // namespace
