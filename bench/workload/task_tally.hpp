// task_tally.hpp: counts how many tasks ran, for the result checks, without a shared counter.
#pragma once

#include <atomic>
#include <cstdint>

namespace bench {

// Each thread bumps its own cache line; total() adds them up. One shared atomic would make the
// `empty` experiment measure contention on that counter instead of the pool.
class task_tally {
 public:
  struct alignas(64) slot {
    std::atomic<std::uint64_t> count{0};
  };

  static void hit() noexcept {
    slot& s = mine();
    // Only this thread writes its slot: a load and a store, no read-modify-write.
    s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // The calling thread's slot, enrolled if it has none: read later (count, after the wait,
  // like total()) it says how many tasks that thread ran itself.
  static slot& mine() noexcept {
    if (mine_ == nullptr) mine_ = enroll();
    return *mine_;
  }
  // reset() only while no task runs. total() after the pool's wait, which orders it after the
  // tasks' hits, is exact; while tasks run it is a snapshot that may miss the latest hits.
  static void reset();
  static std::uint64_t total();

 private:
  static slot* enroll();  // a slot for this thread, kept for the life of the process
  static inline thread_local slot* mine_ = nullptr;
};

}  // namespace bench
