// sync/dekker.cpp: the heavy side of the asymmetric barriers (dekker.hpp).
#include "sync/dekker.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

namespace spool::detail {

std::atomic<bool> asymmetric_barriers_on{false};

#ifndef SPOOL_TSAN
namespace {

long membarrier(int cmd) noexcept { return syscall(__NR_membarrier, cmd, 0u, 0); }

}  // namespace
#endif

bool enable_asymmetric_barriers() noexcept {
#ifdef SPOOL_TSAN
  return false;  // ThreadSanitizer would not see the pairing: read-modify-writes instead
#else
  // Once per process, before any pool has started a thread: the flag goes true only while no
  // light side of any pool runs yet (this is called before the first pool's first thread, and
  // call_once orders a second pool's constructor after it), so no pairing ever has a light
  // side that skips the fence against a heavy side that took only a fence.
  static std::once_flag once;
  std::call_once(once, [] {
    const long supported = membarrier(MEMBARRIER_CMD_QUERY);
    if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) return;
    asymmetric_barriers_on.store(true, std::memory_order_relaxed);
  });
  return asymmetric_barriers_on.load(std::memory_order_relaxed);
#endif
}

void heavy_barrier() noexcept {
#ifndef SPOOL_TSAN
  // The call fails only if the process is not registered, which it is whenever the flag is
  // set; a full fence then keeps the pairing correct in any case.
  if (!asymmetric_barriers_on.load(std::memory_order_relaxed) ||
      membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
#endif
}

}  // namespace spool::detail
