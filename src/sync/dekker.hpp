// sync/dekker.hpp: the barriers of the Dekker pairings in the pool. Each side writes its own
// word, then, after a barrier, reads the other's; if both barriers are full, sequential
// consistency forbids both reads missing.
//
// Asymmetric pairings. Where one side runs on every submission (a producer checking the closed
// flag, a notifier checking for sleepers) and the other rarely (close(), a worker about to
// sleep), the frequent side takes light_barrier() and the rare side heavy_barrier(). With the
// kernel's membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), heavy_barrier() makes every thread of
// the process that is running at that moment execute a full memory barrier before it returns
// (a thread that is not running passed one when it was switched out), so a light side needs
// only to keep the compiler from reordering its store and its load. Why no read is missed:
// take the point where the light side's thread executed that barrier. If it falls before the
// light side's load, the heavy side's store (made before the call) is visible to that load; if
// it falls after the light side's store, that store is visible when heavy_barrier() returns,
// and so to the heavy side's load. One of the two holds, whatever the interleaving.
// Without membarrier (an old kernel, a filter that refuses the call), both are a full fence.
//
// ThreadSanitizer models neither fences nor membarrier: under it the reading side does a
// read-modify-write instead (load_after_full_barrier, the parker's notify_one), which is also
// correct (it joins the release sequence of the other side's writes), just costlier.
#pragma once

#include <atomic>

#if defined(__SANITIZE_THREAD__)
#define SPOOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPOOL_TSAN 1
#endif
#endif

namespace spool::detail {

// True once enable_asymmetric_barriers() registered this process for membarrier. It only
// ever goes from false to true, before the first pool has a thread (see the .cpp).
extern std::atomic<bool> asymmetric_barriers_on;

// Registers the process for membarrier, once; every pool's constructor calls it before it
// starts a thread. False if the kernel refuses (then both barriers stay full fences).
bool enable_asymmetric_barriers() noexcept;

// The frequent side's barrier, between its store and its load.
inline void light_barrier() noexcept {
  if (asymmetric_barriers_on.load(std::memory_order_relaxed)) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

// The rare side's barrier: membarrier, or a full fence.
void heavy_barrier() noexcept;

// A full fence, then a plain load: a notifier that finds nobody waiting never writes the
// shared line. Symmetric: both sides of such a pairing take a full fence.
template <class T>
T load_after_full_barrier(std::atomic<T>& word) noexcept {
#ifdef SPOOL_TSAN
  return word.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return word.load(std::memory_order_seq_cst);
#endif
}

// The light side's load: a plain load after light_barrier() (a read-modify-write under
// ThreadSanitizer, whose heavy side is then a plain seq_cst read-modify-write as well).
template <class T>
T load_after_light_barrier(std::atomic<T>& word) noexcept {
#ifdef SPOOL_TSAN
  return word.fetch_add(0, std::memory_order_seq_cst);
#else
  light_barrier();
  return word.load(std::memory_order_relaxed);
#endif
}

}  // namespace spool::detail
