// When the reporter holds an outcome for others to join it (reporter.hpp, "Batching under
// load"): a choice of its own, with nothing but <chrono>, so that a test can check it.
#pragma once

#include <chrono>

namespace spool::queue::detail {

// How long a first outcome waits for others while the reporter holds.
inline constexpr std::chrono::milliseconds outcome_hold{2};

// The reporter's choice: hold the next outcome when the last call found several waiting and
// outcomes arrive more than one per half outcome_hold on average.
[[nodiscard]] constexpr bool hold_outcomes(bool several_waited,
                                           std::chrono::steady_clock::duration mean_gap) noexcept {
  return several_waited && mean_gap < std::chrono::steady_clock::duration(outcome_hold) / 2;
}

// The moving average of the gaps between outcomes after one more gap (each gap weighs 1/8).
[[nodiscard]] constexpr std::chrono::steady_clock::duration next_mean_gap(
    std::chrono::steady_clock::duration mean, std::chrono::steady_clock::duration gap) noexcept {
  return mean + (gap - mean) / 8;
}

}  // namespace spool::queue::detail
