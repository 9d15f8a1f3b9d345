// run_slice: when an event loop yields its core. Times and context-switch counts are passed in,
// so nothing here depends on the clock or the scheduler.
#include "event/run_slice.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

namespace {

using namespace std::chrono_literals;
using spoold::run_slice;
using time_point = run_slice::time_point;

const time_point t0{std::chrono::seconds(100)};

TEST(RunSlice, DueOnceASliceHasPassed) {
  run_slice s(500us, t0, 7);
  EXPECT_FALSE(s.due(t0));
  EXPECT_FALSE(s.due(t0 + 499us));
  EXPECT_TRUE(s.due(t0 + 500us));
  EXPECT_TRUE(s.due(t0 + 5ms));  // asking does not start a slice
}

TEST(RunSlice, ALoopThatHeldItsCoreYields) {
  run_slice s(500us, t0, 7);
  ASSERT_TRUE(s.due(t0 + 600us));
  EXPECT_TRUE(s.held_core(t0 + 600us, 7));  // no switch since the slice began
}

TEST(RunSlice, ALoopThatSleptOrWasPreemptedStartsANewSlice) {
  run_slice s(500us, t0, 7);
  ASSERT_TRUE(s.due(t0 + 600us));
  EXPECT_FALSE(s.held_core(t0 + 600us, 8));  // it gave its core up meanwhile
  EXPECT_FALSE(s.due(t0 + 1099us));          // the new slice began at the reading
  ASSERT_TRUE(s.due(t0 + 1100us));
  EXPECT_TRUE(s.held_core(t0 + 1100us, 8));  // and it held the core through that one
}

TEST(RunSlice, ALoopThatSleepsOnceASliceNeverYields) {
  run_slice s(500us, t0, 0);
  std::uint64_t switches = 0;
  for (int slice = 1; slice <= 100; ++slice) {
    ++switches;  // a short sleep somewhere in every slice
    const time_point now = t0 + slice * 500us;
    ASSERT_TRUE(s.due(now));
    EXPECT_FALSE(s.held_core(now, switches)) << "slice " << slice;
  }
}

TEST(RunSlice, AYieldStartsTheNextSliceWhereItReturned) {
  run_slice s(500us, t0, 7);
  ASSERT_TRUE(s.due(t0 + 500us));
  ASSERT_TRUE(s.held_core(t0 + 500us, 7));
  // Others ran for 3 ms before the yield returned (one more switch): the loop's own slice
  // starts after them.
  s.yielded(t0 + 3500us, 8);
  EXPECT_FALSE(s.due(t0 + 3999us));
  ASSERT_TRUE(s.due(t0 + 4000us));
  EXPECT_TRUE(s.held_core(t0 + 4000us, 8));
}

TEST(RunSlice, ASliceOfZeroNeverYields) {
  run_slice s(0us, t0, 0);
  EXPECT_FALSE(s.due(t0));
  EXPECT_FALSE(s.due(t0 + 1h));
  s.yielded(t0, 0);
  EXPECT_FALSE(s.due(t0 + 2h));
}

TEST(RunSlice, TheLargestSliceTheOptionAllows) {
  run_slice s(1'000'000us, t0, 0);
  EXPECT_FALSE(s.due(t0 + 999'999us));
  EXPECT_TRUE(s.due(t0 + 1s));
}

}  // namespace
