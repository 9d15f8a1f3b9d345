// Continuations that see the outcome: then_try (the ready future, value or exception) and
// then_error (the exception only; a value passes through), unwrapping (a continuation that
// returns a future gives a future of its value), and futures made ready with a value or an
// exception, with or without a pool.
#include <spool/spool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

#include "support.hpp"

namespace {

using spool_test::error_code_of;
using spool_test::pool_config;

TEST(ThenTry, RecoversFromAFailure) {
  spool::pool p(pool_config(2));
  auto f = p.submit([]() -> int {
              throw std::runtime_error("bad input");
            }).then_try([](spool::future<int> done) {
    EXPECT_TRUE(done.ready());
    try {
      return done.get();
    } catch (const std::runtime_error&) {
      return -1;
    }
  });
  EXPECT_EQ(f.get(), -1);
  auto g =
      p.submit([] { return 4; }).then_try([](spool::future<int> done) { return done.get() * 2; });
  EXPECT_EQ(g.get(), 8);
}

TEST(ThenTry, OnASharedFutureAndAVoidOne) {
  spool::pool p(pool_config(2));
  spool::shared_future<int> s = p.submit([] { return 3; }).share();
  auto a = s.then_try([](spool::shared_future<int> done) { return done.get() + 1; });
  auto b = s.then_try([](const spool::shared_future<int>& done) { return done.get() + 2; });
  EXPECT_EQ(a.get(), 4);
  EXPECT_EQ(b.get(), 5);
  auto v = p.submit([] { throw std::logic_error("void"); }).then_try([](spool::future<void> d) {
    try {
      d.get();
      return std::string("value");
    } catch (const std::logic_error& e) {
      return std::string(e.what());
    }
  });
  EXPECT_EQ(v.get(), "void");
}

TEST(ThenError, CatchAllRecoversAndAValuePassesThrough) {
  spool::pool p(pool_config(2));
  std::atomic<int> calls{0};
  auto recovered = p.submit([]() -> int {
                      throw std::runtime_error("x");
                    }).then_error([&](std::exception_ptr e) {
    ++calls;
    EXPECT_TRUE(e != nullptr);
    return 0;
  });
  EXPECT_EQ(recovered.get(), 0);
  auto passed = p.submit([] { return 7; }).then_error([&](std::exception_ptr) {
    ++calls;
    return 0;
  });
  EXPECT_EQ(passed.get(), 7);
  EXPECT_EQ(calls.load(), 1);
}

TEST(ThenError, TypedHandlerSeesOnlyItsType) {
  spool::pool p(pool_config(2));
  auto caught = p.submit([]() -> std::string {
                   throw std::out_of_range("range");
                 }).then_error([](const std::logic_error& e) {  // out_of_range is a logic_error
    return std::string("caught ") + e.what();
  });
  EXPECT_EQ(caught.get(), "caught range");
  auto other = p.submit([]() -> std::string {
                  throw std::runtime_error("runtime");
                }).then_error([](const std::logic_error&) { return std::string("no"); });
  EXPECT_THROW(other.get(), std::runtime_error);
  auto cancelled_source =
      spool::make_exceptional_future<int>(p, std::make_exception_ptr(spool::task_cancelled()));
  auto on_cancel =
      std::move(cancelled_source).then_error([](const spool::task_cancelled&) { return 42; });
  EXPECT_EQ(on_cancel.get(), 42);
  // A handler that throws replaces the failure.
  auto rethrown =
      p.submit([]() -> int {
         throw std::runtime_error("first");
       }).then_error([](const std::runtime_error&) -> int { throw std::logic_error("second"); });
  EXPECT_THROW(rethrown.get(), std::logic_error);
}

TEST(ThenError, VoidFutureAndAReturnedFuture) {
  spool::pool p(pool_config(2));
  std::atomic<bool> handled{false};
  auto v = p.submit([] { throw std::runtime_error("v"); }).then_error([&](std::exception_ptr) {
    handled = true;
  });
  v.get();
  EXPECT_TRUE(handled.load());
  auto retried = p.submit([]() -> int {
                    throw std::runtime_error("once");
                  }).then_error([&p](std::exception_ptr) { return p.submit([] { return 9; }); });
  EXPECT_EQ(retried.get(), 9);
}

TEST(Unwrap, ThenReturningAFutureGivesItsValue) {
  spool::pool p(pool_config(2));
  spool::pool other(pool_config(1));
  auto f = p.submit([] { return 2; }).then([&other](int x) {
    return other.submit([x] { return x * 10; });
  });
  static_assert(std::is_same_v<decltype(f), spool::future<int>>);
  EXPECT_EQ(f.get(), 20);
  auto failed = p.submit([] { return 1; }).then([&p](int) {
    return p.submit([]() -> std::string { throw std::runtime_error("inner"); });
  });
  EXPECT_THROW(failed.get(), std::runtime_error);
  auto empty = p.submit([] { return 1; }).then([](int) { return spool::future<int>(); });
  EXPECT_EQ(error_code_of([&] { empty.get(); }), spool::errc::invalid_argument);
  auto chained = p.submit([] { return 1; })
                     .then([&p](int x) { return p.submit([x] { return x + 1; }); })
                     .then([&p](int x) { return p.submit([x] { return x + 1; }); })
                     .then([](int x) { return x + 1; });
  EXPECT_EQ(chained.get(), 4);
  auto via_try = p.submit([] { return 5; }).then_try([&p](spool::future<int> d) {
    return p.submit([v = d.get()] { return v * 2; });
  });
  EXPECT_EQ(via_try.get(), 10);
  auto to_void = p.submit([] { return 1; }).then([&p](int) { return p.submit([] {}); });
  static_assert(std::is_same_v<decltype(to_void), spool::future<void>>);
  to_void.get();
}

// The returned future completes later (a promise): the outer future waits for it.
TEST(Unwrap, WaitsForTheReturnedFuture) {
  spool::pool p(pool_config(1));
  spool::promise<std::string> inner(p);
  spool::future<std::string> handed = inner.get_future();
  auto f = p.submit([] { return 0; }).then([&handed](int) { return std::move(handed); });
  p.wait_idle();
  EXPECT_FALSE(f.ready());
  inner.set_value("late");
  EXPECT_EQ(f.get(), "late");
}

TEST(ReadyFuture, ValueAndExceptionWithAndWithoutAPool) {
  auto v = spool::make_ready_future(std::string("ready"));
  EXPECT_TRUE(v.ready());
  EXPECT_EQ(v.get(), "ready");
  auto e = spool::make_exceptional_future<int>(std::make_exception_ptr(std::runtime_error("e")));
  EXPECT_TRUE(e.ready());
  EXPECT_THROW(e.get(), std::runtime_error);
  spool::future<void> nothing = spool::make_ready_future();
  nothing.get();
  EXPECT_EQ(error_code_of([] { (void)spool::make_exceptional_future<int>(nullptr); }),
            spool::errc::invalid_argument);

  // Without a pool, then() runs on the calling thread; then(pool, f) runs on that pool.
  const std::thread::id here = std::this_thread::get_id();
  std::thread::id ran_on;
  auto inline_then = spool::make_ready_future(1).then([&](int x) {
    ran_on = std::this_thread::get_id();
    return x + 1;
  });
  EXPECT_TRUE(inline_then.ready());
  EXPECT_EQ(ran_on, here);
  EXPECT_EQ(inline_then.get(), 2);
  spool::pool p(pool_config(1));
  auto on_pool =
      spool::make_ready_future(1).then(p, [&p](int x) { return p.is_worker() ? x : -1; });
  EXPECT_EQ(spool_test::get_elsewhere(on_pool), 1);
  auto of_pool =
      spool::make_ready_future(p, 3).then([&p](int x) { return p.is_worker() ? x : -1; });
  EXPECT_EQ(spool_test::get_elsewhere(of_pool), 3);
  auto failed_of_pool =
      spool::make_exceptional_future<void>(p, std::make_exception_ptr(std::logic_error("l")));
  EXPECT_THROW(failed_of_pool.get(), std::logic_error);
}

}  // namespace
