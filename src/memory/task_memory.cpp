// memory/task_memory.cpp: where task objects get their memory (work_item::operator new and
// delete): a per-thread cache in front of two allocators.
//
//  - magazines.hpp: the general one. A thread's freed blocks go into its magazines, full
//    magazines go to a shared depot, and a thread that allocates more than it frees takes full
//    ones from there; the depot's lock is taken once per magazine, never waited for.
//  - rings.hpp: for a thread that allocates far more than it frees (a producer whose tasks the
//    workers free), a ring of blocks handed out in address order.
//
// Each thread's cache holds, per size class, its magazine pair and its ring cursor. An
// allocation tries the ring first (once the thread has one), then the magazines; a free of a
// ring block marks the block free, any other free goes to the magazines. The cache is
// trivially destructible, so it stays usable for the whole life of the thread; the thread's
// `flusher` empties it when the thread exits.
#include <cstddef>
#include <cstdint>
#include <new>

#include "memory/magazines.hpp"
#include "memory/rings.hpp"
#include "memory/size_classes.hpp"
#include "memory/task_memory_testing.hpp"
#include "spool/detail/work_item.hpp"

namespace spool::detail {
namespace {

#if SPOOL_TASK_CACHE

using namespace memory;

class thread_cache {
 public:
  void* allocate(std::size_t size) {
    if (!armed_) arm();
    const std::size_t rc = ring_class_of(size);
    if (rc < k_classes) {
      if (void* b = rings_[rc].allocate(rc)) return b;
    }
    const std::size_t c = class_of(size);
    return magazines_[c].allocate(c);
  }

  void deallocate(void* p, std::size_t size) noexcept {
    const std::size_t rc = ring_class_of(size);
    if (rc < k_classes) {
      if (in_ring(p)) {
        free_ring_block(p, rc);
        return;
      }
      rings_[rc].note_free();
    }
    if (!armed_) arm();
    const std::size_t c = class_of(size);
    magazines_[c].deallocate(p, c);
  }

  // The thread is exiting: rings go back to the pool of rings, magazines to the depot.
  void flush() noexcept {
    for (std::size_t c = 0; c < k_classes; ++c) {
      rings_[c].flush(c);
      magazines_[c].flush(c);
    }
  }

 private:
  void arm() noexcept;  // registers the thread's flusher (first use on this thread)

  ring_cursor rings_[k_classes];
  magazine_pair magazines_[k_classes];
  bool armed_ = false;
};

// initial-exec: used by every allocation and free (src/README.md, "Thread-local storage").
[[gnu::tls_model("initial-exec")]] thread_local constinit thread_cache cache;

// Its destructor runs at thread exit. A block freed on the thread after that (by a later
// thread_local destructor, or by static destructors on the main thread) stays on the thread's
// list and goes with the process.
struct flusher {
  ~flusher() { cache.flush(); }
};
[[gnu::tls_model("initial-exec")]] thread_local flusher flush_at_exit;

void thread_cache::arm() noexcept {
  armed_ = true;
  // The first odr-use of a thread_local with a destructor registers that destructor.
  [[maybe_unused]] flusher* volatile registered = &flush_at_exit;
}

#endif  // SPOOL_TASK_CACHE

}  // namespace

namespace task_memory_testing {

#if SPOOL_TASK_CACHE
bool recycling() noexcept { return true; }
void hold_depot(std::size_t size) noexcept { memory::lock_depot(memory::class_of(size)); }
void release_depot(std::size_t size) noexcept { memory::unlock_depot(memory::class_of(size)); }
std::uint64_t busy_fallbacks() noexcept { return memory::depot_busy_count(); }
bool in_ring(const void* p) noexcept { return memory::in_ring(p); }
std::size_t ring_after() noexcept { return static_cast<std::size_t>(memory::k_ring_after); }
std::size_t ring_capacity(std::size_t size) noexcept {
  const std::size_t c = memory::ring_class_of(size);
  return c < memory::k_classes ? memory::ring_blocks(c) : 0;
}
#else
bool recycling() noexcept { return false; }
void hold_depot(std::size_t) noexcept {}
void release_depot(std::size_t) noexcept {}
std::uint64_t busy_fallbacks() noexcept { return 0; }
bool in_ring(const void*) noexcept { return false; }
std::size_t ring_after() noexcept { return 0; }
std::size_t ring_capacity(std::size_t) noexcept { return 0; }
#endif

}  // namespace task_memory_testing

void* work_item::operator new(std::size_t size) {
#if SPOOL_TASK_CACHE
  if (size <= memory::k_max_size) return cache.allocate(size);
#endif
  return ::operator new(size);
}

void* work_item::operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return work_item::operator new(size);
  } catch (...) {
    return nullptr;
  }
}

void work_item::operator delete(void* p, std::size_t size) noexcept {
#if SPOOL_TASK_CACHE
  if (size <= memory::k_max_size) {
    cache.deallocate(p, size);
    return;
  }
#endif
  ::operator delete(p, size);
}

}  // namespace spool::detail
