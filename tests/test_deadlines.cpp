// Deadlines: when_all and when_any with a timeout (every form), the variadic when_any,
// when_all over shared_futures, shared_future::wait_until, and shutdown with a deadline that
// reports what it dropped. No test asserts how late a deadline fires; a test that needs one
// to pass blocks on the result, and a test that needs one not to pass uses an hour.
#include <spool/spool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core_testing.hpp"
#include "support.hpp"

namespace {

using namespace std::chrono_literals;
using spool_test::error_code_of;
using spool_test::gate;
using spool_test::hold_workers;
using spool_test::pool_config;
using spool_test::release_counter;

std::size_t pending_timers(spool::pool& p) {
  return spool::detail::core_testing::pending_timers(spool::detail::pool_access::of(p));
}

TEST(WhenAllFor, TimesOutAndCancelsTheInputsNotStarted) {
  spool::pool p(pool_config(1));
  std::latch started(1);
  gate release;
  hold_workers(p, started, release);
  std::atomic<int> released{0};
  auto all = spool::when_all_for(5ms, p.submit([c = release_counter(released)] { return 1; }),
                                 p.submit([c = release_counter(released)] { return 2; }));
  EXPECT_EQ(error_code_of([&] { all.get(); }), spool::errc::timed_out);
  EXPECT_EQ(released.load(), 2);
  release.open();
  p.wait_idle();
  EXPECT_EQ(p.statistics().cancelled, 2u);
  EXPECT_EQ(pending_timers(p), 0u);
}

TEST(WhenAllFor, ReadyInTimeGivesTheValuesAndCancelsItsTimer) {
  spool::pool p(pool_config(2));
  auto all = spool::when_all_for(1h, p.submit([] { return 1; }), p.submit([] {}),
                                 p.submit([] { return std::string("x"); }));
  auto [a, b, c] = all.get();
  EXPECT_EQ(a, 1);
  (void)b;
  EXPECT_EQ(c, "x");
  std::vector<spool::future<int>> v;
  for (int i = 0; i < 4; ++i) v.push_back(p.submit([i] { return i; }));
  EXPECT_EQ(spool::when_all_until(std::chrono::steady_clock::now() + 1h, std::move(v)).get(),
            (std::vector<int>{0, 1, 2, 3}));
  p.wait_idle();  // the last input's task settled the result (and its timer) as it completed
  EXPECT_EQ(pending_timers(p), 0u);  // settled early: the timers left the queue
}

TEST(WhenAnyFor, TimesOutOrGivesTheFirst) {
  spool::pool p(pool_config(2));
  spool::promise<int> never(p);
  std::vector<spool::future<int>> inputs;
  inputs.push_back(never.get_future());
  EXPECT_EQ(error_code_of([&] { spool::when_any_for(2ms, std::move(inputs)).get(); }),
            spool::errc::timed_out);
  EXPECT_TRUE(never.cancelled());  // the inputs not started were cancelled

  spool::promise<int> slow(p);
  auto any = spool::when_any_for(1h, slow.get_future(), p.submit([] { return std::string("y"); }));
  auto r = any.get();
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(std::get<1>(r.futures).get(), "y");
  slow.set_value(3);
  EXPECT_EQ(std::get<0>(r.futures).get(), 3);
  p.wait_idle();
  EXPECT_EQ(pending_timers(p), 0u);
}

TEST(WhenAnyFor, NeedsAPoolToKeepTheDeadline) {
  EXPECT_EQ(error_code_of([] { (void)spool::when_any_for(1ms, spool::make_ready_future(1)); }),
            spool::errc::invalid_argument);
}

// A pool that is gone cannot keep a deadline: the result fails at once.
TEST(WhenAllFor, OnAPoolThatIsGoneFailsWithShutDown) {
  spool::future<int> done;
  std::optional<spool::promise<int>> pr;
  {
    spool::pool p(pool_config(1));
    done = p.submit([] { return 1; });
    pr.emplace(p);
  }
  auto all = spool::when_all_for(1h, std::move(done), pr->get_future());
  EXPECT_EQ(error_code_of([&] { all.get(); }), spool::errc::shut_down);
  EXPECT_TRUE(pr->cancelled());
}

// The pool's shutdown drops the timer of a far deadline: the result times out then.
TEST(WhenAllFor, ShutdownBeforeTheDeadlineTimesTheResultOut) {
  std::optional<spool::promise<int>> pr;
  spool::future<std::tuple<int>> all;
  {
    spool::pool p(pool_config(1));
    pr.emplace(p);
    all = spool::when_all_for(1h, pr->get_future());
  }
  ASSERT_TRUE(all.ready());
  EXPECT_EQ(error_code_of([&] { all.get(); }), spool::errc::timed_out);
}

TEST(WhenAny, VariadicHandsBackATuple) {
  spool::pool p(pool_config(2));
  spool::promise<int> never(p);
  auto any = spool::when_any(never.get_future(), p.submit([] {}), p.submit([] { return 2.5; }));
  auto r = any.get();
  EXPECT_TRUE(r.index == 1 || r.index == 2);
  EXPECT_FALSE(std::get<0>(r.futures).ready());
  std::get<1>(r.futures).get();
  EXPECT_EQ(std::get<2>(r.futures).get(), 2.5);
}

TEST(WhenAll, OverSharedFutures) {
  spool::pool p(pool_config(2));
  spool::shared_future<int> a = p.submit([] { return 1; }).share();
  spool::shared_future<std::string> b = p.submit([] { return std::string("b"); }).share();
  auto t = spool::when_all(a, b, p.submit([] { return 3; })).get();
  EXPECT_EQ(std::get<0>(t), 1);
  EXPECT_EQ(std::get<1>(t), "b");
  EXPECT_EQ(std::get<2>(t), 3);
  EXPECT_EQ(a.get(), 1);  // a shared input stays readable
  std::vector<spool::shared_future<int>> many{a, a, p.submit([] { return 5; }).share()};
  EXPECT_EQ(spool::when_all(many).get(), (std::vector<int>{1, 1, 5}));
  spool::shared_future<void> v = p.submit([] {}).share();
  spool::when_all(std::vector<spool::shared_future<void>>{v, v}).get();
  // Cancelling the result leaves shared inputs alone.
  spool::promise<int> pr(p);
  spool::shared_future<int> s = pr.get_future().share();
  auto pending = spool::when_all(s, p.submit([] { return 1; }));
  EXPECT_TRUE(pending.cancel());
  EXPECT_FALSE(pr.cancelled());
  pr.set_value(9);
  EXPECT_EQ(s.get(), 9);
}

TEST(SharedFuture, WaitUntil) {
  spool::pool p(pool_config(1));
  spool::promise<int> pr(p);
  spool::shared_future<int> s = pr.get_future().share();
  EXPECT_FALSE(s.wait_until(std::chrono::steady_clock::now() + 1ms));
  EXPECT_FALSE(s.wait_until(std::chrono::system_clock::now() + 1ms));
  pr.set_value(4);
  EXPECT_TRUE(s.wait_until(std::chrono::steady_clock::now() + 1h));
  EXPECT_EQ(s.get(), 4);
}

// A drain with a deadline: what is queued when the deadline passes is dropped (the running
// task finishes), pending timers not due by then are dropped, and the report says so.
TEST(ShutdownWithDeadline, ReportsWhatItDropped) {
  spool::pool p(pool_config(1));
  std::latch started(1);
  gate release;
  hold_workers(p, started, release);
  std::vector<spool::future<int>> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(p.submit([i] { return i; }));
  auto later = p.submit_after(1h, [] { return 0; });
  std::thread opener([&] {
    // The queued tasks are counted cancelled once the deadline has dropped them.
    while (p.statistics().cancelled < 3) std::this_thread::yield();
    release.open();
  });
  const spool::shutdown_report r = p.shutdown_for(5ms);
  opener.join();
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.timers_dropped, 1u);
  EXPECT_EQ(r.dropped, 4u);
  for (auto& f : queued) EXPECT_THROW(f.get(), spool::task_cancelled);
  EXPECT_THROW(later.get(), spool::task_cancelled);
  EXPECT_EQ(p.shutdown_for(1h).dropped, 0u);  // a second call finds nothing
}

// In time: everything queued runs, and timers due by the deadline run first.
TEST(ShutdownWithDeadline, InTimeRunsEverythingAndTheTimersDueByThen) {
  spool::pool p(pool_config(2));
  std::atomic<int> runs{0};
  for (int i = 0; i < 10; ++i) p.post([&] { ++runs; });
  auto soon = p.submit_after(1ms, [] { return 7; });
  const spool::shutdown_report r = p.shutdown_until(std::chrono::steady_clock::now() + 1h);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.dropped, 0u);
  EXPECT_EQ(r.timers_dropped, 0u);
  EXPECT_EQ(runs.load(), 10);
  EXPECT_EQ(soon.get(), 7);
}

}  // namespace
