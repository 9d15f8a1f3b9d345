// task_memory.cpp: where task objects get their memory (task::operator new and delete).
//
// Why: a task is usually allocated by the thread that submits it and freed by the worker that
// runs it. Through malloc that pattern is slow: the worker's free lands in its own small
// cache until that overflows, then in the submitter's arena, and the submitter, whose own
// cache never refills, takes the arena lock on nearly every allocation (a profile of
// `spool-bench empty` showed a third of the submitting thread's time in malloc).
//
// How: blocks are recycled in four size classes (32, 64, 128 and 256 bytes; larger tasks use
// the global operator new). Each thread keeps a free list per class. A thread that frees more
// than it allocates (a worker) hands blocks back in batches of k_batch to a shared depot; a
// thread that allocates more than it frees (a producer) takes a whole batch from the depot
// when its own list runs dry. So the depot's lock is taken once per k_batch tasks, not per task.
//
// Invariants:
//  - A block on any list is unused memory of its class's size that came from the global
//    operator new; it goes back to the global operator delete only when the depot is full.
//  - The depot holds at most 4 MiB of blocks per class (16 MiB in all); past that, batches
//    are freed. A thread's own list holds at most 2 * k_batch blocks per
//    class, and a thread's lists go to the depot when it exits.
//  - The depot is never destroyed (threads may exit after static destructors have run), so
//    its memory is still reachable at exit, not leaked.
//  - fork(): the depot's locks are taken around fork() (pthread_atfork), so a child never
//    inherits one held by a thread that does not exist in it.
//
// Under AddressSanitizer every call goes straight to the global operators, so that a task used
// after it was freed is still caught.
#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#include "spool/detail/task.hpp"

namespace spool::detail {
namespace {

#if defined(__SANITIZE_ADDRESS__)
#define SPOOL_TASK_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPOOL_TASK_CACHE 0
#endif
#endif
#ifndef SPOOL_TASK_CACHE
#define SPOOL_TASK_CACHE 1
#endif

#if SPOOL_TASK_CACHE

constexpr std::size_t k_classes = 4;
constexpr std::size_t k_min_size = 32;  // class c holds blocks of k_min_size << c bytes
constexpr std::size_t k_max_size = k_min_size << (k_classes - 1);
constexpr std::uint32_t k_batch = 64;
// The depot keeps up to 4 MiB per class: enough to recycle a burst of a hundred thousand
// small tasks (a producer that runs ahead of its workers), small enough to hold for good.
constexpr std::size_t k_depot_bytes = std::size_t{4} << 20;
constexpr std::uint32_t depot_batches(std::size_t size_class) noexcept {
  return static_cast<std::uint32_t>(k_depot_bytes / (k_batch * (k_min_size << size_class)));
}

// Index of the smallest class that fits `size` (size <= k_max_size).
constexpr std::size_t class_of(std::size_t size) noexcept {
  std::size_t c = 0;
  while ((k_min_size << c) < size) ++c;
  return c;
}

// A free block; a batch is a chain of k_batch of them, and the depot chains batches through
// their first block's `next_batch`.
struct block {
  block* next;
  block* next_batch;
};
static_assert(sizeof(block) <= k_min_size);

class depot {
 public:
  // A batch of exactly k_batch blocks, or null.
  block* take() noexcept;
  // Keeps the batch, or frees it if the depot is full.
  void give(block* batch, std::size_t size_class) noexcept;

  static depot& of(std::size_t size_class) noexcept;

 private:
  static void lock_all() noexcept;
  static void unlock_all() noexcept;

  std::mutex mu_;
  block* batches_ = nullptr;  // guarded by mu_
  std::uint32_t count_ = 0;   // guarded by mu_
};

depot* depots[k_classes];

depot& depot::of(std::size_t size_class) noexcept {
  // Built once, all classes together, and never destroyed (see the invariants above).
  static const bool built = [] {
    for (auto& d : depots) d = new depot;
    pthread_atfork(&lock_all, &unlock_all, &unlock_all);
    return true;
  }();
  (void)built;
  return *depots[size_class];
}

void depot::lock_all() noexcept {
  for (depot* d : depots) {
    if (d != nullptr) d->mu_.lock();
  }
}

void depot::unlock_all() noexcept {
  for (depot* d : depots) {
    if (d != nullptr) d->mu_.unlock();
  }
}

block* depot::take() noexcept {
  std::lock_guard lock(mu_);
  block* b = batches_;
  if (b != nullptr) {
    batches_ = b->next_batch;
    --count_;
  }
  return b;
}

void depot::give(block* batch, std::size_t size_class) noexcept {
  {
    std::lock_guard lock(mu_);
    if (count_ < depot_batches(size_class)) {
      batch->next_batch = batches_;
      batches_ = batch;
      ++count_;
      return;
    }
  }
  const std::size_t size = k_min_size << size_class;
  while (batch != nullptr) {
    block* next = batch->next;
    ::operator delete(static_cast<void*>(batch), size);
    batch = next;
  }
}

// One thread's free lists. Trivially destructible, so it stays usable for the whole life of
// the thread; the thread's `flusher` (below) empties it when the thread exits.
class thread_cache {
 public:
  void* allocate(std::size_t c) {
    if (!armed_) arm();
    list& l = lists_[c];
    if (l.head == nullptr) {
      block* batch = depot::of(c).take();
      if (batch == nullptr) return ::operator new(k_min_size << c);
      l.head = batch;
      l.count = k_batch;
    }
    block* b = l.head;
    l.head = b->next;
    --l.count;
    // The next block was most likely freed by another thread: start moving its line here
    // while the caller builds and queues this task.
    if (l.head != nullptr) __builtin_prefetch(l.head, 1);
    return b;
  }

  void deallocate(void* p, std::size_t c) noexcept {
    if (!armed_) arm();
    list& l = lists_[c];
    auto* b = static_cast<block*>(p);
    b->next = l.head;
    l.head = b;
    if (++l.count > 2 * k_batch) depot::of(c).give(cut_batch(c), c);
  }

  // The thread is exiting: whole batches go to the depot, the rest to the global operator.
  void flush() noexcept {
    for (std::size_t c = 0; c < k_classes; ++c) {
      while (lists_[c].count >= k_batch) depot::of(c).give(cut_batch(c), c);
      for (block* b = lists_[c].head; b != nullptr;) {
        block* next = b->next;
        ::operator delete(static_cast<void*>(b), k_min_size << c);
        b = next;
      }
      lists_[c] = {};
    }
  }

 private:
  struct list {
    block* head = nullptr;
    std::uint32_t count = 0;
  };

  void arm() noexcept;  // registers the thread's flusher (first use on this thread)

  // Detaches the first k_batch blocks of class c (the list holds at least that many).
  block* cut_batch(std::size_t c) noexcept {
    list& l = lists_[c];
    block* first = l.head;
    block* last = first;
    for (std::uint32_t i = 1; i < k_batch; ++i) last = last->next;
    l.head = last->next;
    last->next = nullptr;
    l.count -= k_batch;
    return first;
  }

  list lists_[k_classes];
  bool armed_ = false;
};

thread_local constinit thread_cache cache;

// Its destructor runs at thread exit. A block freed on the thread after that (by a later
// thread_local destructor, or by static destructors on the main thread) stays on the thread's
// list and goes with the process.
struct flusher {
  ~flusher() { cache.flush(); }
};
thread_local flusher flush_at_exit;

void thread_cache::arm() noexcept {
  armed_ = true;
  // The first odr-use of a thread_local with a destructor registers that destructor.
  [[maybe_unused]] flusher* volatile registered = &flush_at_exit;
}

#endif  // SPOOL_TASK_CACHE

}  // namespace

void* task::operator new(std::size_t size) {
#if SPOOL_TASK_CACHE
  if (size <= k_max_size) return cache.allocate(class_of(size));
#endif
  return ::operator new(size);
}

void* task::operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return task::operator new(size);
  } catch (...) {
    return nullptr;
  }
}

void task::operator delete(void* p, std::size_t size) noexcept {
#if SPOOL_TASK_CACHE
  if (size <= k_max_size) {
    cache.deallocate(p, class_of(size));
    return;
  }
#endif
  ::operator delete(p, size);
}

}  // namespace spool::detail
