// run_slice: when an event loop yields its core. Times are passed in, so nothing here depends on
// the clock or the scheduler.
#include "event/run_slice.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace {

using namespace std::chrono_literals;
using spoold::run_slice;
using time_point = run_slice::time_point;

const time_point t0{std::chrono::seconds(100)};

TEST(RunSlice, DueOnceTheLoopRanASlice) {
  run_slice s(100us, t0);
  EXPECT_FALSE(s.due(t0));
  EXPECT_FALSE(s.due(t0 + 99us));
  EXPECT_TRUE(s.due(t0 + 100us));
  EXPECT_TRUE(s.due(t0 + 5ms));  // asking does not start a slice: only a yield or a wait does
}

TEST(RunSlice, AYieldStartsTheNextSliceWhereItReturned) {
  run_slice s(100us, t0);
  ASSERT_TRUE(s.due(t0 + 150us));
  // Others ran for 3 ms before the yield returned: the loop's own slice starts after them.
  s.yielded(t0 + 3150us);
  EXPECT_FALSE(s.due(t0 + 3150us));
  EXPECT_FALSE(s.due(t0 + 3249us));
  EXPECT_TRUE(s.due(t0 + 3250us));
}

TEST(RunSlice, AWaitOfASliceCountsAsGivingTheCoreUp) {
  run_slice s(100us, t0);
  s.waited(t0 + 50us, t0 + 150us);  // slept (or was preempted) a whole slice
  EXPECT_FALSE(s.due(t0 + 249us));
  EXPECT_TRUE(s.due(t0 + 250us));
}

TEST(RunSlice, ShorterWaitsDoNotRestartTheSlice) {
  run_slice s(100us, t0);
  s.waited(t0 + 10us, t0 + 40us);
  s.waited(t0 + 60us, t0 + 159us);  // 99 us: less than a slice
  EXPECT_TRUE(s.due(t0 + 160us));
}

TEST(RunSlice, ASliceOfZeroNeverYields) {
  run_slice s(0us, t0);
  EXPECT_FALSE(s.due(t0));
  EXPECT_FALSE(s.due(t0 + 1h));
  s.waited(t0, t0);
  s.yielded(t0);
  EXPECT_FALSE(s.due(t0 + 2h));
}

TEST(RunSlice, TheLargestSliceTheOptionAllows) {
  run_slice s(1'000'000us, t0);
  EXPECT_FALSE(s.due(t0 + 999'999us));
  EXPECT_TRUE(s.due(t0 + 1s));
}

}  // namespace
