// report_limit: one line per interval, the first at once, every occurrence in exactly one line's
// count. Times are passed in, so nothing here depends on the clock.
#include "report_limit.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

constexpr std::int64_t interval = 1'000'000'000;  // 1 s in ns

TEST(ReportLimit, FirstOccurrenceIsReportedAtOnce) {
  spoold::report_limit r{std::chrono::nanoseconds(interval)};
  EXPECT_EQ(r.occurred_at(0), 1U);
}

TEST(ReportLimit, OccurrencesWithinTheIntervalGoIntoTheNextLine) {
  spoold::report_limit r{std::chrono::nanoseconds(interval)};
  EXPECT_EQ(r.occurred_at(5), 1U);
  EXPECT_EQ(r.occurred_at(6), 0U);
  EXPECT_EQ(r.occurred_at(interval), 0U);  // the line is due at 5 + interval
  EXPECT_EQ(r.occurred_at(interval + 5), 3U);
  EXPECT_EQ(r.occurred_at(interval + 6), 0U);
  // After a quiet spell the next one is reported at once, with the one left over.
  EXPECT_EQ(r.occurred_at(10 * interval), 2U);
}

TEST(ReportLimit, ManyThreadsEveryOccurrenceCountedOnce) {
  spoold::report_limit r{std::chrono::nanoseconds(interval)};
  constexpr int threads = 4;
  constexpr int each = 20000;
  std::vector<std::uint64_t> reported(threads, 0);
  std::vector<std::uint64_t> lines(threads, 0);
  {
    std::vector<std::jthread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        for (int i = 0; i < each; ++i) {
          // Times step through many intervals, so lines fall due while others still count.
          const std::uint64_t n = r.occurred_at(static_cast<std::int64_t>(i) * (interval / 1000));
          reported[t] += n;
          if (n != 0) ++lines[t];
        }
      });
    }
  }
  std::uint64_t total = 0;
  std::uint64_t line_count = 0;
  for (int t = 0; t < threads; ++t) {
    total += reported[t];
    line_count += lines[t];
  }
  total += r.occurred_at(1000 * interval) - 1;  // what no line took yet, beside this one
  EXPECT_EQ(total, std::uint64_t{threads} * each);
  // The threads' times span 20 intervals: at most one line in each, and one at the start.
  EXPECT_GE(line_count, 1U);
  EXPECT_LE(line_count, 21U);
}

}  // namespace
