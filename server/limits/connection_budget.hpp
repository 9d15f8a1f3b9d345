// The --max-connections budget of a model's threads and loops: one count of the connections
// admitted and not yet released, shared by every thread that admits.
#pragma once

#include <atomic>
#include <cstddef>

namespace spoold {

// The --max-connections budget of a model's threads: lock-free, so no accepting thread waits on
// another for it.
class connection_budget {
 public:
  explicit connection_budget(std::size_t max) noexcept : max_(max) {}
  // True if one more connection may be served; then release() must follow.
  bool admit() noexcept {
    if (open_.fetch_add(1, std::memory_order_relaxed) < max_) return true;
    open_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  void release() noexcept { open_.fetch_sub(1, std::memory_order_relaxed); }
  // Connections admitted and not yet released (an admit() past the limit counts for a moment).
  [[nodiscard]] std::size_t admitted() const noexcept {
    return open_.load(std::memory_order_relaxed);
  }

 private:
  std::size_t max_;
  std::atomic<std::size_t> open_{0};
};

}  // namespace spoold
