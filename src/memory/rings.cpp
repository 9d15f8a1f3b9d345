// memory/rings.cpp: the pool of rings that threads take and give back (see rings.hpp for the
// design and its invariants).
#include "memory/rings.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#if SPOOL_TASK_CACHE

namespace spool::detail::memory {

std::atomic<char*> region_base{nullptr};

namespace {

// A ring given back keeps the blocks still in use marked so; its next owner passes over them
// until they are freed.
class ring_pool {
 public:
  static ring_pool& get() noexcept {
    // Never destroyed, like the depots; out of memory at the first use ends the process.
    static ring_pool* const pool = new ring_pool;  // NOLINT(bugprone-unhandled-exception-at-new)
    return *pool;
  }

  char* take(std::size_t size_class) noexcept {
    std::lock_guard lock(mu_);
    if (idle_count_[size_class] != 0) return idle_[size_class][--idle_count_[size_class]];
    char* base = region_base.load(std::memory_order_relaxed);
    if (base == nullptr || fresh_ == k_rings) return nullptr;
    return base + k_ring_bytes * fresh_++;
  }

  void give_back(char* ring, std::size_t size_class) noexcept {
    std::lock_guard lock(mu_);
    idle_[size_class][idle_count_[size_class]++] = ring;  // at most k_rings in all
  }

 private:
  ring_pool() noexcept {
    void* m = mmap(nullptr, k_region_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m != MAP_FAILED) region_base.store(static_cast<char*>(m), std::memory_order_relaxed);
    pthread_atfork(&lock_pool, &unlock_pool, &unlock_pool);
  }
  static void lock_pool() noexcept { get().mu_.lock(); }
  static void unlock_pool() noexcept { get().mu_.unlock(); }

  std::mutex mu_;
  std::size_t fresh_ = 0;                   // guarded by mu_: rings never handed out
  char* idle_[k_classes][k_rings] = {};     // guarded by mu_
  std::size_t idle_count_[k_classes] = {};  // guarded by mu_
};

}  // namespace

char* take_ring(std::size_t size_class) noexcept { return ring_pool::get().take(size_class); }

void give_back_ring(char* ring, std::size_t size_class) noexcept {
  ring_pool::get().give_back(ring, size_class);
}

void populate_ring(char* p, std::size_t bytes) noexcept {
#ifdef MADV_POPULATE_WRITE
  // Once refused (a kernel before 5.14: EINVAL), not asked again.
  static std::atomic<bool> refused{false};
  if (refused.load(std::memory_order_relaxed)) return;
  if (madvise(p, bytes, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
    refused.store(true, std::memory_order_relaxed);
  }
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace spool::detail::memory

#endif  // SPOOL_TASK_CACHE
