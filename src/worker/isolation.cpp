// worker/isolation.cpp: opening and closing a region (spool::isolate); the rules are in
// isolation.hpp.
#include "worker/isolation.hpp"

#include <atomic>

namespace spool::detail {

region_id isolation_enter() noexcept {
  worker* w = current_worker();
  if (w == nullptr) return 0;
  // A fresh number for each region from a process-wide 32-bit counter that skips 0, so a
  // number repeats only after 2^32 regions (work_item::isolation is 32 bits to keep every task
  // small). Only then could a region's waits take a task of an older region with the same
  // number, still queued or still open: the help any wait outside a region gives, so the
  // worst case is the hazard isolation exists to remove, never a lost or doubled task.
  static std::atomic<region_id> next_region{1};
  const region_id outer = w->isolation;
  region_id fresh = next_region.fetch_add(1, std::memory_order_relaxed);
  if (fresh == 0) fresh = next_region.fetch_add(1, std::memory_order_relaxed);
  w->isolation = fresh;
  return outer;
}

void isolation_leave(region_id outer) noexcept {
  if (worker* w = current_worker()) w->isolation = outer;
}

}  // namespace spool::detail
