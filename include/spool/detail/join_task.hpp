// spool/detail/join_task.hpp: fork/join without an allocation, for the algorithms of
// spool/parallel.hpp. Internal: users call spool::parallel_invoke and the algorithms.
#pragma once

#include <atomic>
#include <cstdint>

#include "spool/detail/work_item.hpp"

namespace spool {
class pool;
}

namespace spool::detail {

// A call taking its context, that cannot throw.
using join_call = void (*)(void* context) noexcept;

// The forked half of a fork/join. It lives on the stack of the worker that forks, which keeps
// it alive until the half has run or been dropped, so it costs no allocation and no reference
// count (a future's state needs both because either side may be the last to let go). The
// protocol is in src/api/join.cpp.
class join_task final : public work_item {
 public:
  join_task(join_call call, void* context) noexcept : call_(call), context_(context) {}
  join_task(const join_task&) = delete;
  join_task& operator=(const join_task&) = delete;

  outcome run(core& owner) noexcept override;
  void cancel() noexcept override;
  void destroy() noexcept override {}  // refused: nothing ran; fork_join_here says so

  // Bits of state_. k_ran and k_dropped are set once, by finish(), and never cleared.
  static constexpr std::uint32_t k_ran = 1;
  static constexpr std::uint32_t k_dropped = 2;
  static constexpr std::uint32_t k_waited = 4;  // the forking worker may sleep in the parker

  // Ran or dropped: no thread will touch it again.
  bool ready() const noexcept {
    return (state_.load(std::memory_order_acquire) & (k_ran | k_dropped)) != 0;
  }
  bool ran() const noexcept { return (state_.load(std::memory_order_acquire) & k_ran) != 0; }
  // Sets k_waited; returns true (having set nothing that matters) if already ready.
  bool mark_waited_by_worker() noexcept {
    return (state_.fetch_or(k_waited, std::memory_order_seq_cst) & (k_ran | k_dropped)) != 0;
  }

 private:
  friend class core;

  // Publishes the outcome (k_ran or k_dropped) and wakes the forking worker if it sleeps.
  void finish(std::uint32_t how) noexcept;

  join_call call_;
  void* context_;
  core* owner_ = nullptr;  // set when forked
  std::atomic<std::uint32_t> state_{0};
};

// Runs left(left_context) here and `right` as a task of p, and returns when both are done:
// true if right's call ran (here or on another worker), false if p refused it or dropped it
// unrun (a discarding shutdown), when the caller runs it itself if it wants it run. Only for a
// worker of p (pool::is_worker()); anywhere else it runs left and returns false.
bool fork_join_here(pool& p, join_task& right, join_call left, void* left_context) noexcept;

}  // namespace spool::detail
