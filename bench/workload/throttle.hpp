// throttle.hpp: holds a loop to a rate (the WorkerQueue experiment's send and receive throttles).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "workload/spin.hpp"

namespace bench {

// wait() returns at most `rate` times a second. Each call is due one period after the previous
// due time; a caller that falls behind may catch up, but by no more than `credit` worth of calls:
// enough to make up for being descheduled on a busy machine (which says nothing about the pool),
// not enough to hide a consumer that is slower than its rate (its backlog keeps growing).
// Below 10k/s (periods over 100 us) it sleeps most of the way; above, it spins on steady_clock,
// since a sleep overshoots by tens of microseconds.
class throttle {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::chrono::nanoseconds credit = std::chrono::milliseconds(50);

  throttle() = default;
  explicit throttle(double rate) { start(rate); }

  void start(double rate) {
    period_ns_ = 1e9 / rate;
    epoch_ = clock::now();
    due_ns_ = 0;
    due_already_ = 0;
  }

  // Waits until the next call is due; returns the time it returns at, or for a call that was
  // already due at the last clock reading, that reading.
  clock::time_point wait() {
    if (due_already_ > 0) {
      // A caller that is behind need not read the clock (25 ns here, a fifth of an item's
      // budget at 8M/s) for calls that were due at the last reading: they return at once.
      --due_already_;
      due_ns_ += period_ns_;
      return last_;
    }
    auto now = clock::now();
    double now_ns = since_epoch(now);
    if (now_ns < due_ns_) {
      if (due_ns_ - now_ns > sleep_threshold_ns)
        std::this_thread::sleep_until(
            epoch_ + std::chrono::nanoseconds(static_cast<std::int64_t>(due_ns_ - 50'000)));
      do {
        cpu_relax();
        now = clock::now();
        now_ns = since_epoch(now);
      } while (now_ns < due_ns_);
    }
    due_ns_ = std::max(due_ns_ + period_ns_, now_ns - static_cast<double>(credit.count()));
    if (now_ns > due_ns_) {
      due_already_ = static_cast<unsigned>(
          std::min((now_ns - due_ns_) / period_ns_, static_cast<double>(max_due_already)));
    }
    last_ = now;
    return now;
  }

 private:
  static constexpr double sleep_threshold_ns = 100'000;
  // At most this many calls skip the clock after one reading, so the time returned is never
  // more than this many calls old.
  static constexpr unsigned max_due_already = 32;
  double since_epoch(clock::time_point t) const {
    return static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch_).count());
  }

  double period_ns_ = 0;
  clock::time_point epoch_{};
  double due_ns_ = 0;  // when the next call is due, in ns since epoch_ (fractional periods add up)
  unsigned due_already_ = 0;  // calls due at the last reading, not yet made
  clock::time_point last_{};  // that reading
};

}  // namespace bench
