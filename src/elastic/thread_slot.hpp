// elastic/thread_slot.hpp: what the sizer (sizer.hpp) keeps in each worker slot: the thread
// running there, whether it is idle, and how the monitor measures it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace spool::detail {

struct thread_slot {
  using clock = std::chrono::steady_clock;

  // Owner only: nested blocking_regions; whether the thread is out of work (its own view of
  // `idle`), and since when.
  std::uint32_t blocking = 0;
  bool was_idle = true;
  clock::time_point idle_since;

  // For the monitor: whether the thread is out of work (spinning, parked), and the thread's
  // CPU clock, to tell a busy thread on the CPU from one blocked inside its task.
  std::atomic<bool> idle{true};
  std::atomic<int> cpu_clock{k_no_clock};  // a clockid_t (thread CPU clocks are negative)
  static constexpr int k_no_clock = 0;     // CLOCK_REALTIME: never a thread's CPU clock
  std::atomic<int> tid{0};                 // the kernel's thread id, for /proc

  // Guarded by the sizer's lock: a thread runs here (running), has retired and awaits its join
  // (retired), or the slot is free. `running` is mirrored in `active` for lock-free readers.
  enum class state_kind : unsigned char { free, running, retired };
  state_kind state = state_kind::free;
  std::atomic<bool> active{false};
  std::thread thread;
};

// Names the calling thread (for ps, top, debuggers), cut to the kernel's 15 characters.
void name_this_thread(std::string name) noexcept;

}  // namespace spool::detail
