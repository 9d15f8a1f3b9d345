// The reporter's choice of when to hold outcomes (queue/worker/outcome_hold.hpp): only when the
// last call found several outcomes waiting and outcomes come more than one per millisecond.
#include <gtest/gtest.h>

#include <chrono>

#include "worker/outcome_hold.hpp"

namespace {

using namespace std::chrono_literals;
using spool::queue::detail::hold_outcomes;
using spool::queue::detail::next_mean_gap;
using spool::queue::detail::outcome_hold;
using duration = std::chrono::steady_clock::duration;

TEST(ReporterHold, OnlyWhenSeveralWaitedAndOutcomesComeFast) {
  EXPECT_TRUE(hold_outcomes(true, 100us));
  EXPECT_TRUE(hold_outcomes(true, duration(outcome_hold) / 2 - 1ns));
  EXPECT_FALSE(hold_outcomes(true, duration(outcome_hold) / 2));  // one per millisecond: no
  EXPECT_FALSE(hold_outcomes(true, 1s));
  // A call that found one outcome alone (a caller that waits for each result) never holds,
  // however fast outcomes came before.
  EXPECT_FALSE(hold_outcomes(false, 0ns));
  EXPECT_FALSE(hold_outcomes(false, 100us));
}

TEST(ReporterHold, TheMeanGapFollowsTheGapsAnEighthAtATime) {
  EXPECT_EQ(next_mean_gap(800us, 800us), 800us);
  EXPECT_EQ(next_mean_gap(0us, 800us), 100us);
  EXPECT_EQ(next_mean_gap(800us, 0us), 700us);
  // From the reporter's start (1 s), outcomes 400 us apart bring the mean under the
  // threshold after a few dozen, and an idle second brings it back above at once.
  duration mean = 1s;
  int outcomes = 0;
  while (!hold_outcomes(true, mean)) {
    mean = next_mean_gap(mean, 400us);
    ++outcomes;
    ASSERT_LT(outcomes, 100);
  }
  EXPECT_GT(outcomes, 30);
  EXPECT_FALSE(hold_outcomes(true, next_mean_gap(mean, 10s)));
}

}  // namespace
