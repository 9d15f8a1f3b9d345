// A failure that can repeat thousands of times a second (accept() out of descriptors, a store
// call refused while the store is down) is reported on stderr at most once per interval per
// process: the line says how many happened since the line before, and the first after a quiet
// interval is reported at once. Any thread may call occurred(); exactly one of the calls that
// fall due in an interval is told to print, and no occurrence is counted twice or lost from the
// counts (one not in a line's count is in the next line's).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace spoold {

class report_limit {
 public:
  explicit report_limit(std::chrono::nanoseconds interval) noexcept
      : interval_ns_(interval.count()) {}

  // Counts one occurrence. Returns 0 if this caller should not print, else the number of
  // occurrences its line reports (this one and those not reported before it).
  std::uint64_t occurred() noexcept {
    return occurred_at(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count());
  }

  // As occurred(), at `now_ns` on a monotonic clock (tests pass their own times).
  std::uint64_t occurred_at(std::int64_t now_ns) noexcept {
    unreported_.fetch_add(1, std::memory_order_relaxed);
    std::int64_t due = next_ns_.load(std::memory_order_relaxed);
    if (now_ns < due) return 0;
    // One caller wins the interval's line; the others' occurrences are in its count or the next.
    if (!next_ns_.compare_exchange_strong(due, now_ns + interval_ns_, std::memory_order_relaxed)) {
      return 0;
    }
    return unreported_.exchange(0, std::memory_order_relaxed);
  }

 private:
  const std::int64_t interval_ns_;
  std::atomic<std::uint64_t> unreported_{0};
  // When the next line may be printed; the first occurrence is reported at once.
  std::atomic<std::int64_t> next_ns_{std::numeric_limits<std::int64_t>::min()};
};

}  // namespace spoold
