// sync/dekker.hpp: the reading half of the Dekker pairings in the pool (a notifier that made its
// change and now looks whether anyone must be told). Each side writes its own word, then,
// after a full barrier, reads the other's; sequential consistency forbids both reads missing.
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

// A full fence, then a plain load: a notifier that finds nobody waiting never writes the
// shared line. ThreadSanitizer does not model fences; under it a read-modify-write stands in,
// which is also correct (it joins the release sequence of the other side's writes), just
// costlier.
template <class T>
T load_after_full_barrier(std::atomic<T>& word) noexcept {
#ifdef SPOOL_TSAN
  return word.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return word.load(std::memory_order_seq_cst);
#endif
}

}  // namespace spool::detail
