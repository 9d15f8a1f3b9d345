// Continuations: future::then, shared_future, promise, when_all, when_any.
#include <spool/spool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "stress_scale.hpp"
#include "support.hpp"

namespace {

using spool_test::pool_config;

TEST(Then, ChainsValuesOnThePool) {
  spool::pool p(pool_config(2));
  auto f = p.submit([] { return 20; })
               .then([&](int x) {
                 EXPECT_TRUE(p.is_worker());
                 return x + 1;
               })
               .then([](int x) { return std::to_string(x * 2); });
  EXPECT_EQ(f.get(), "42");
}

TEST(Then, VoidSourceAndVoidContinuation) {
  spool::pool p(pool_config(2));
  std::atomic<int> calls{0};
  auto f = p.submit([&] { ++calls; }).then([&] { ++calls; }).then([&] { return calls.load(); });
  EXPECT_EQ(f.get(), 2);
}

TEST(Then, FailurePropagatesWithoutCallingF) {
  spool::pool p(pool_config(2));
  std::atomic<bool> called{false};
  auto f = p.submit([]() -> int { throw std::runtime_error("boom"); }).then([&](int x) {
    called = true;
    return x;
  });
  EXPECT_THROW(f.get(), std::runtime_error);
  EXPECT_FALSE(called.load());
  auto g = p.submit([] { return 1; }).then([](int) -> int { throw std::logic_error("in then"); });
  EXPECT_THROW(g.get(), std::logic_error);
}

TEST(Then, CancelledSourcePropagates) {
  spool::pool p(pool_config(1));
  std::latch started(1);
  spool_test::gate release;
  p.post([&] {
    started.count_down();
    release.wait();
  });
  started.wait();
  auto queued = p.submit([] { return 1; });
  auto next = std::move(queued).then([](int x) { return x + 1; });
  std::thread stopper([&] { p.shutdown(spool::shutdown_mode::discard); });
  // The discard drops the queued task; its continuation then reports the cancellation.
  EXPECT_THROW(next.get(), spool::task_cancelled);
  release.open();
  stopper.join();
}

// f may take the value by lvalue reference (the value moved out of the state, then passed).
TEST(Then, ContinuationTakingAnLvalueReference) {
  spool::pool p(pool_config(1));
  auto f = p.submit([] { return 20; }).then([](int& x) {
    x += 1;
    return x;
  });
  EXPECT_EQ(f.get(), 21);
  auto s = p.submit([] { return std::string("ab"); }).then([](std::string& v) {
    v += "c";
    return v;
  });
  EXPECT_EQ(s.get(), "abc");
}

// cancel() on a then() future: the continuation never runs, and the cancellation reaches the
// source (here a promise, which learns that its value is no longer wanted).
TEST(Then, CancelBeforeTheSourceIsReady) {
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  std::atomic<bool> called{false};
  auto f = pr.get_future().then([&](int x) {
    called = true;
    return x;
  });
  EXPECT_TRUE(f.cancel());
  EXPECT_TRUE(f.ready());
  EXPECT_FALSE(f.cancel());  // once
  EXPECT_THROW(f.get(), spool::task_cancelled);
  EXPECT_TRUE(pr.cancelled());
  pr.set_value(1);  // nobody wants it: ignored
  p.wait_idle();
  EXPECT_FALSE(called.load());
}

TEST(Then, CancelAfterTheContinuationRanIsFalse) {
  spool::pool p(pool_config(1));
  auto f = p.submit([] { return 1; }).then([](int x) { return x + 1; });
  f.wait();
  EXPECT_FALSE(f.cancel());
  EXPECT_EQ(f.get(), 2);
}

TEST(Promise, CancelledFutureIgnoresTheValue) {
  spool::pool p(pool_config(1));
  spool::promise<std::string> pr(p);
  auto f = pr.get_future();
  EXPECT_FALSE(pr.cancelled());
  EXPECT_TRUE(f.cancel());
  EXPECT_TRUE(pr.cancelled());
  pr.set_value("late");
  EXPECT_THROW(f.get(), spool::task_cancelled);
  EXPECT_EQ(spool_test::error_code_of([&] { pr.set_value("twice"); }),
            spool::errc::invalid_argument);
}

TEST(Then, EmptyFutureIsInvalidArgument) {
  spool::future<int> none;
  EXPECT_EQ(spool_test::error_code_of([&] { (void)none.then([](int x) { return x; }); }),
            spool::errc::invalid_argument);
}

TEST(Then, AfterShutdownRunsOnTheCompletingThread) {
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  auto f = pr.get_future().then([](int x) { return x * 3; });
  p.shutdown();
  pr.set_value(5);  // the pool refuses the continuation: it runs here
  ASSERT_TRUE(f.ready());
  EXPECT_EQ(f.get(), 15);
}

// A chain of continuations that the pool refuses runs on the completing thread one after
// another, not one inside the other: 200,000 links nested would overflow the stack.
TEST(Then, LongChainCompletedAfterShutdownRunsInConstantStack) {
  constexpr int n = 200000;
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  spool::future<int> f = pr.get_future();
  for (int i = 0; i < n; ++i) f = std::move(f).then([](int x) { return x + 1; });
  p.shutdown();
  pr.set_value(0);
  ASSERT_TRUE(f.ready());
  EXPECT_EQ(f.get(), n);
}

// The same with the pool destroyed, and with inline continuations on a live pool.
TEST(Then, LongChainsAfterThePoolIsGoneAndInlineRunInConstantStack) {
  constexpr int n = 200000;
  std::optional<spool::promise<int>> pr;
  spool::future<int> f;
  {
    spool::pool p(pool_config(1));
    pr.emplace(p);
    f = pr->get_future();
    for (int i = 0; i < n; ++i) f = std::move(f).then([](int x) { return x + 1; });
  }
  pr->set_value(0);
  EXPECT_EQ(f.get(), n);

  spool::pool live(pool_config(1));
  spool::promise<int> inline_source(live);
  spool::future<int> g = inline_source.get_future();
  for (int i = 0; i < n; ++i) g = std::move(g).then_inline([](int x) { return x + 1; });
  inline_source.set_value(0);
  ASSERT_TRUE(g.ready());
  EXPECT_EQ(g.get(), n);
}

// Completion races with registration: then() on a future whose task is finishing right now.
TEST(ThenStress, RegistrationRacesCompletion) {
  spool::pool p(pool_config(2));
  const int rounds = stress_iterations(20000);
  std::vector<spool::future<int>> results;
  results.reserve(static_cast<std::size_t>(rounds));
  for (int i = 0; i < rounds; ++i) {
    auto f = p.submit([i] { return i; });
    results.push_back(std::move(f).then([](int x) { return x + 1; }));
  }
  long long sum = 0;
  for (auto& r : results) sum += r.get();
  EXPECT_EQ(sum, static_cast<long long>(rounds) * (rounds + 1) / 2);
}

// The same race from the promise side: one thread completes while another registers.
TEST(ThenStress, PromiseCompletionRacesRegistration) {
  spool::pool p(pool_config(2));
  const int rounds = stress_iterations(5000);
  for (int i = 0; i < rounds; ++i) {
    spool::promise<int> pr(p);
    spool::shared_future<int> sf = pr.get_future().share();
    std::latch go(2);
    std::thread setter([&] {
      go.arrive_and_wait();
      pr.set_value(i);
    });
    go.arrive_and_wait();
    auto a = sf.then([](const int& x) { return x + 1; });
    auto b = sf.then([](const int& x) { return x + 2; });
    setter.join();
    ASSERT_EQ(a.get(), i + 1);
    ASSERT_EQ(b.get(), i + 2);
  }
}

TEST(SharedFuture, ManyReadersSeeOneValue) {
  spool::pool p(pool_config(2));
  spool::shared_future<std::string> sf = p.submit([] { return std::string("value"); }).share();
  spool::shared_future<std::string> copy = sf;
  std::vector<spool::future<std::size_t>> lens;
  for (int i = 0; i < 100; ++i) {
    lens.push_back(copy.then([](const std::string& s) { return s.size(); }));
  }
  std::vector<std::thread> readers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    readers.emplace_back([sf, &ok] {
      if (sf.get() == "value") ++ok;
    });
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), 4);
  for (auto& l : lens) EXPECT_EQ(l.get(), 5u);
  EXPECT_TRUE(sf.valid());
  EXPECT_EQ(&sf.get(), &copy.get());  // one value, not copies
}

TEST(SharedFuture, FailureRethrownByEveryGet) {
  spool::pool p(pool_config(1));
  auto sf = p.submit([]() -> int { throw std::runtime_error("once"); }).share();
  EXPECT_THROW(sf.get(), std::runtime_error);
  EXPECT_THROW(sf.get(), std::runtime_error);
  EXPECT_THROW(sf.then([](const int& x) { return x; }).get(), std::runtime_error);
}

TEST(Promise, ValueExceptionAndBrokenPromise) {
  spool::pool p(pool_config(1));
  spool::promise<int> a(p);
  auto fa = a.get_future();
  EXPECT_EQ(spool_test::error_code_of([&] { (void)a.get_future(); }),
            spool::errc::invalid_argument);
  a.set_value(7);
  EXPECT_EQ(fa.get(), 7);
  EXPECT_EQ(spool_test::error_code_of([&] { a.set_value(8); }), spool::errc::invalid_argument);

  spool::promise<void> b(p);
  auto fb = b.get_future();
  b.set_exception(std::make_exception_ptr(std::runtime_error("set")));
  EXPECT_THROW(fb.get(), std::runtime_error);

  spool::future<int> orphan;
  {
    spool::promise<int> c(p);
    orphan = c.get_future();
  }
  EXPECT_THROW(orphan.get(), spool::task_cancelled);
}

TEST(WhenAll, VariadicTuple) {
  spool::pool p(pool_config(2));
  auto all = spool::when_all(p.submit([] { return 1; }), p.submit([] { return std::string("b"); }),
                             p.submit([] { return 2.5; }));
  auto [i, s, d] = all.get();
  EXPECT_EQ(i, 1);
  EXPECT_EQ(s, "b");
  EXPECT_EQ(d, 2.5);

  auto failing = spool::when_all(p.submit([] { return 1; }),
                                 p.submit([]() -> int { throw std::logic_error("first"); }),
                                 p.submit([]() -> int { throw std::runtime_error("second"); }));
  EXPECT_THROW(failing.get(), std::logic_error);
}

TEST(WhenAll, VariadicVoidInputHoldsItsPlace) {
  spool::pool p(pool_config(2));
  std::atomic<bool> ran{false};
  auto all = spool::when_all(p.submit([] { return 7; }), p.submit([&ran] { ran = true; }),
                             p.submit([] { return std::string("c"); }));
  static_assert(
      std::is_same_v<decltype(all), spool::future<std::tuple<int, std::monostate, std::string>>>);
  auto [i, nothing, s] = all.get();
  EXPECT_EQ(i, 7);
  EXPECT_EQ(nothing, std::monostate{});
  EXPECT_EQ(s, "c");
  EXPECT_TRUE(ran.load());

  // A failed void input is rethrown like any other, first in argument order.
  auto failing = spool::when_all(p.submit([] { return 1; }),
                                 p.submit([] { throw std::logic_error("void first"); }),
                                 p.submit([]() -> int { throw std::runtime_error("second"); }));
  EXPECT_THROW(failing.get(), std::logic_error);

  auto only_voids = spool::when_all(p.submit([] {}), p.submit([] {}));
  auto both = only_voids.get();
  static_assert(std::is_same_v<decltype(both), std::tuple<std::monostate, std::monostate>>);
}

TEST(WhenAll, VectorInOrderAndFirstFailure) {
  spool::pool p(pool_config(2));
  std::vector<spool::future<int>> in;
  for (int i = 0; i < 1000; ++i) in.push_back(p.submit([i] { return i * i; }));
  std::vector<int> out = spool::when_all(std::move(in)).get();
  ASSERT_EQ(out.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(out[static_cast<std::size_t>(i)], i * i);

  std::vector<spool::future<void>> voids;
  voids.push_back(p.submit([] {}));
  voids.push_back(p.submit([] { throw std::logic_error("first"); }));
  voids.push_back(p.submit([] { throw std::runtime_error("second"); }));
  EXPECT_THROW(spool::when_all(std::move(voids)).get(), std::logic_error);
}

TEST(WhenAll, WaitsForTheLastInput) {
  spool::pool p(pool_config(2));
  spool::promise<int> late(p);
  auto all = spool::when_all(p.submit([] { return 1; }), late.get_future());
  EXPECT_FALSE(all.wait_for(std::chrono::milliseconds(0)));
  late.set_value(2);
  EXPECT_EQ(std::get<1>(all.get()), 2);
}

TEST(WhenAll, BadInput) {
  spool::pool p(pool_config(1));
  using futures = std::vector<spool::future<int>>;
  EXPECT_EQ(spool_test::error_code_of([] { (void)spool::when_all(futures{}); }),
            spool::errc::invalid_argument);
  std::vector<spool::future<int>> with_empty;
  with_empty.emplace_back();
  EXPECT_EQ(spool_test::error_code_of([&] { (void)spool::when_all(std::move(with_empty)); }),
            spool::errc::invalid_argument);
  EXPECT_EQ(spool_test::error_code_of([] { (void)spool::when_any(futures{}); }),
            spool::errc::invalid_argument);
}

TEST(WhenAny, ReturnsTheReadyOneAndTheRest) {
  spool::pool p(pool_config(2));
  std::vector<spool::promise<int>> promises;
  std::vector<spool::future<int>> in;
  for (int i = 0; i < 5; ++i) {
    promises.emplace_back(p);
    in.push_back(promises.back().get_future());
  }
  auto any = spool::when_any(std::move(in));
  promises[3].set_value(33);
  spool::when_any_result<int> r = any.get();
  EXPECT_EQ(r.index, 3u);
  ASSERT_EQ(r.futures.size(), 5u);
  EXPECT_EQ(r.futures[3].get(), 33);
  EXPECT_FALSE(r.futures[0].ready());
  for (int i = 0; i < 5; ++i)
    if (i != 3) promises[static_cast<std::size_t>(i)].set_value(i);
  EXPECT_EQ(r.futures[4].get(), 4);
}

TEST(WhenAnyStress, ManyRacingInputs) {
  spool::pool p(pool_config(2));
  const int rounds = stress_iterations(2000);
  for (int k = 0; k < rounds; ++k) {
    std::vector<spool::future<int>> in;
    for (int i = 0; i < 4; ++i) in.push_back(p.submit([i] { return i; }));
    auto r = spool::when_any(std::move(in)).get();
    ASSERT_LT(r.index, 4u);
    ASSERT_EQ(r.futures[r.index].get(), static_cast<int>(r.index));
  }
}

}  // namespace
