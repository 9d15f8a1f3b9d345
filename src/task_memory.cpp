// task_memory.cpp: where task objects get their memory (task::operator new and delete).
//
// Why: a task is usually allocated by the thread that submits it and freed by the worker that
// runs it. Through malloc that pattern is slow: the worker's free lands in its own small
// cache until that overflows, then in the submitter's arena, and the submitter, whose own
// cache never refills, takes the arena lock on nearly every allocation (a profile of
// `spool-bench empty` showed a third of the submitting thread's time in malloc).
//
// How: blocks are recycled in four size classes (32, 64, 128 and 256 bytes; larger tasks use
// the global operator new). Free blocks are held in *magazines*: arrays of up to k_batch block
// addresses. Each thread keeps two magazines per class (a loaded one and a spare, as in
// Bonwick's magazine layer). A thread that frees more than it allocates (a worker) fills
// magazines and hands full ones to a shared depot; a thread that allocates more than it frees
// (a producer) swaps its empty magazine for a full one. So the depot's lock is taken once per
// k_batch tasks, not per task.
//
// Nobody waits for the depot. Its lock is tried a few times and then given up: the holder may
// be a thread the kernel preempted (a pool of 16 threads on 2 cores), and a waiter would sleep
// for the holder's time slice (in `spool-post-burst 16`, the submitter slept on the depot's
// mutex about 4 times per million tasks, the workers 9). A producer that gets nothing (the
// depot busy, or dry because its blocks are still in the workers' magazines) fills its
// magazine from the global operator new, so it asks again only k_batch blocks later; a thread
// freeing into two full magazines gives that one block to the global operator delete.
//
// Why arrays and not a chain through the blocks: a block handed over was last written by the
// worker that ran its task, on another core. Popping from a chain reads the block to find the
// next one, a cache miss on the submitter's critical path every time (two thirds of
// task::operator new's samples in a profile of 16 workers). Popping from an array reads only
// the array, and the addresses of the next few blocks are known in advance, so they are
// prefetched for writing while the caller builds the current task.
//
// Invariants:
//  - Every address in a magazine is unused memory of its class's size that came from the
//    global operator new; it goes back to the global operator delete only when the depot is
//    full, when a thread exits with a partly filled magazine, or (one block) when a thread
//    with two full magazines finds the depot busy.
//  - The depot holds only full magazines (exactly k_batch blocks), at most 4 MiB of blocks per
//    class (16 MiB in all), and at most k_depot_empties empty magazines per class.
//  - A thread holds at most two magazines per class; they go to the depot when it exits.
//  - The depot is never destroyed (threads may exit after static destructors have run), so
//    its memory is still reachable at exit, not leaked.
//  - fork(): the depot's locks are taken around fork() (pthread_atfork), so a child never
//    inherits one held by a thread that does not exist in it.
//
// Under AddressSanitizer every call goes straight to the global operators, so that a task used
// after it was freed is still caught.
#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#include "cpu_relax.hpp"
#include "spool/detail/task.hpp"
#include "task_memory.hpp"

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

// How far ahead of the block being handed out the allocator prefetches.
constexpr std::uint32_t k_prefetch_ahead = 4;

// Up to k_batch free blocks of one class, by address.
struct magazine {
  magazine* next = nullptr;  // the depot's stacks
  std::uint32_t count = 0;
  void* blocks[k_batch];

  bool empty() const noexcept { return count == 0; }
  bool full() const noexcept { return count == k_batch; }
};

// The depot's stack bound for empty magazines, per class.
constexpr std::uint32_t k_depot_empties = 64;

class depot {
 public:
  // A full magazine, or null (none there, or the depot busy). `empty` (may be null) is kept
  // or freed in exchange; if null is returned, `empty` is still the caller's.
  magazine* trade_for_full(magazine* empty) noexcept;
  // `full` (may be null) is kept, or its blocks freed if the depot is full. A thread going on
  // (at_exit false) gets an empty magazine back (from the depot's stack, or a new one; null
  // if none can be made) and never waits: a busy depot makes it return at once with `busy`
  // set and `full` still the caller's. A thread exiting waits for the lock and gets nothing.
  struct traded {
    magazine* empty;
    bool busy;
  };
  traded trade_for_empty(magazine* full, std::size_t size_class, bool at_exit) noexcept;

  static depot& of(std::size_t size_class) noexcept;

 private:
  static void lock_all() noexcept;
  static void unlock_all() noexcept;
  // The lock if it is free now or within a few tries. Nobody sleeps on the depot: its holder
  // may be a thread the kernel has just preempted (a pool oversubscribes its cores), and a
  // waiter would then sleep for the holder's whole time slice. A thread that cannot get the
  // lock uses the global operators for this one block instead.
  bool try_lock_briefly() noexcept;
  friend void task_memory_testing::hold_depot(std::size_t) noexcept;
  friend void task_memory_testing::release_depot(std::size_t) noexcept;

  std::mutex mu_;
  magazine* full_ = nullptr;       // guarded by mu_
  std::uint32_t full_count_ = 0;   // guarded by mu_
  magazine* empty_ = nullptr;      // guarded by mu_
  std::uint32_t empty_count_ = 0;  // guarded by mu_
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

void free_blocks(magazine* m, std::size_t size_class) noexcept {
  const std::size_t size = k_min_size << size_class;
  for (std::uint32_t i = 0; i < m->count; ++i) ::operator delete(m->blocks[i], size);
  m->count = 0;
}

std::atomic<std::uint64_t> busy_count{0};  // task_memory_testing::busy_fallbacks

bool depot::try_lock_briefly() noexcept {
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (mu_.try_lock()) return true;
    for (int i = 0; i < 16; ++i) cpu_relax();
  }
  busy_count.fetch_add(1, std::memory_order_relaxed);
  return false;
}

magazine* depot::trade_for_full(magazine* empty) noexcept {
  magazine* full = nullptr;
  {
    if (!try_lock_briefly()) return nullptr;
    std::lock_guard lock(mu_, std::adopt_lock);
    if (full_ == nullptr) return nullptr;
    full = full_;
    full_ = full->next;
    --full_count_;
    if (empty != nullptr && empty_count_ < k_depot_empties) {
      empty->next = empty_;
      empty_ = empty;
      ++empty_count_;
      empty = nullptr;
    }
  }
  delete empty;
  return full;
}

depot::traded depot::trade_for_empty(magazine* full, std::size_t size_class,
                                     bool at_exit) noexcept {
  magazine* empty = nullptr;
  {
    if (at_exit) {
      mu_.lock();
    } else if (!try_lock_briefly()) {
      return {nullptr, true};
    }
    std::lock_guard lock(mu_, std::adopt_lock);
    if (full != nullptr && full_count_ < depot_batches(size_class)) {
      full->next = full_;
      full_ = full;
      ++full_count_;
      full = nullptr;
    }
    if (!at_exit && empty_ != nullptr) {
      empty = empty_;
      empty_ = empty->next;
      --empty_count_;
    }
  }
  if (full != nullptr) {  // the depot is full: the blocks go, the magazine may be reused
    free_blocks(full, size_class);
    if (!at_exit && empty == nullptr) return {full, false};
    delete full;
  }
  if (at_exit) return {nullptr, false};
  return {empty != nullptr ? empty : new (std::nothrow) magazine, false};
}

// One thread's magazines. Trivially destructible, so it stays usable for the whole life of
// the thread; the thread's `flusher` (below) empties it when the thread exits.
class thread_cache {
 public:
  void* allocate(std::size_t c) {
    if (!armed_) arm();
    slot& s = slots_[c];
    if (s.loaded == nullptr || s.loaded->empty()) {
      if (s.spare != nullptr && !s.spare->empty()) {
        std::swap(s.loaded, s.spare);
      } else {
        magazine* full = depot::of(c).trade_for_full(s.loaded);
        if (full == nullptr) {
          // None to be had (the blocks this thread handed out are still in the workers'
          // magazines, or the depot is busy): a magazine's worth from the global operator,
          // so that this thread asks the depot again only k_batch blocks later, not on every
          // allocation (which kept the depot's lock contended while it was dry).
          if (s.loaded == nullptr) s.loaded = new (std::nothrow) magazine;
          if (s.loaded == nullptr) return ::operator new(k_min_size << c);
          refill(*s.loaded, c);
        } else {
          s.loaded = full;
          // The whole magazine was most likely freed on another core: start moving the first
          // blocks' lines here (the steady-state prefetch below covers the rest).
          for (std::uint32_t i = 1; i < k_prefetch_ahead && i < full->count; ++i) {
            prefetch_for_write(full->blocks[full->count - 1 - i]);
          }
        }
      }
    }
    magazine& m = *s.loaded;
    void* b = m.blocks[--m.count];
    // The caller writes this block now; the one k_prefetch_ahead pops later is started here.
    if (m.count >= k_prefetch_ahead) prefetch_for_write(m.blocks[m.count - k_prefetch_ahead]);
    return b;
  }

  void deallocate(void* p, std::size_t c) noexcept {
    if (!armed_) arm();
    slot& s = slots_[c];
    if (s.loaded == nullptr || s.loaded->full()) {
      if (s.spare == nullptr || !s.spare->full()) {
        std::swap(s.loaded, s.spare);
        if (s.loaded == nullptr) s.loaded = new (std::nothrow) magazine;
      } else {
        // Both magazines are full: the spare goes to the depot for an empty one.
        auto [empty, busy] = depot::of(c).trade_for_empty(s.spare, c, false);
        if (busy) {
          ::operator delete(p, k_min_size << c);
          return;
        }
        s.spare = s.loaded;
        s.loaded = empty;
      }
      if (s.loaded == nullptr) {  // no memory for a magazine: the block goes back at once
        ::operator delete(p, k_min_size << c);
        return;
      }
    }
    s.loaded->blocks[s.loaded->count++] = p;
  }

  // The thread is exiting: full magazines go to the depot; partly filled ones' blocks, and
  // the magazines the depot does not keep, to the global operators.
  void flush() noexcept {
    for (std::size_t c = 0; c < k_classes; ++c) {
      for (magazine* m : {slots_[c].loaded, slots_[c].spare}) {
        if (m == nullptr) continue;
        if (m->full()) {
          depot::of(c).trade_for_empty(m, c, true);
        } else {
          free_blocks(m, c);
          delete m;
        }
      }
      slots_[c] = {};
    }
  }

 private:
  struct slot {
    magazine* loaded = nullptr;
    magazine* spare = nullptr;
  };

  void arm() noexcept;  // registers the thread's flusher (first use on this thread)

  // Fills the empty magazine `m` from the global operator. Throws std::bad_alloc only if not
  // even one block could be had; the blocks already in `m` stay there.
  static void refill(magazine& m, std::size_t c) {
    const std::size_t size = k_min_size << c;
    m.blocks[m.count++] = ::operator new(size);
    while (!m.full()) {
      void* b = ::operator new(size, std::nothrow);
      if (b == nullptr) break;
      m.blocks[m.count++] = b;
    }
  }

  slot slots_[k_classes];
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

namespace task_memory_testing {

#if SPOOL_TASK_CACHE
bool recycling() noexcept { return true; }
void hold_depot(std::size_t size) noexcept { depot::of(class_of(size)).mu_.lock(); }
void release_depot(std::size_t size) noexcept { depot::of(class_of(size)).mu_.unlock(); }
std::uint64_t busy_fallbacks() noexcept { return busy_count.load(std::memory_order_relaxed); }
#else
bool recycling() noexcept { return false; }
void hold_depot(std::size_t) noexcept {}
void release_depot(std::size_t) noexcept {}
std::uint64_t busy_fallbacks() noexcept { return 0; }
#endif

}  // namespace task_memory_testing

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
