// spool/blocking.hpp: telling an elastic pool that a task is about to block.
#pragma once

namespace spool {

// Marks the calling task as about to block (I/O, a lock, a latch) for the object's lifetime.
// On a worker of an elastic pool, the pool starts a compensating thread at once (up to
// max_threads) if fewer than min_threads workers would be left running or work is waiting,
// so blocking tasks cannot starve the others. Anywhere else it does nothing. Not movable.
class blocking_region {
 public:
  blocking_region() noexcept;
  ~blocking_region();
  blocking_region(const blocking_region&) = delete;
  blocking_region& operator=(const blocking_region&) = delete;

 private:
  void* worker_;  // the worker it marked, or null
};

}  // namespace spool
