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
// Rings, for producers. Magazines hand a producer back the blocks in the order the workers
// freed them, which after a few rounds through 16 workers' magazines and the depot is no order
// at all: every new task lands on a line that some other core holds, at an address no hardware
// prefetcher can guess. A thread that has allocated k_ring_after more blocks of a class than it
// freed (a producer whose tasks others free) takes a *ring* for that class: k_ring_bytes of
// blocks that it hands out strictly in address order, going round. The last 4 bytes of a ring
// block are its state word (free / in use), so a ring takes tasks at least 4 bytes smaller
// than its class. Freeing a ring block is one release store to that word, on a line the freeing
// worker already holds (it just ran the task); the producer's acquire load of the word, when
// it comes round, is the only hand-over. A block still in use when the producer comes round
// (a long task, or a backlog longer than the ring) is passed over; after k_ring_tries such
// blocks in a row, the next k_ring_rest allocations come from the magazines. Scratch builds
// measured what the order is worth: a producer thread taking blocks from a never-reused arena
// in address order posted 1.5x as fast at 16 workers on 2 cores (`spool-post-burst 16`), and
// a reused 8 MiB ring without state words did the same; docs/bench/history.md ("The previous
// BENCHMARKS.md: `empty` at 69739c7, ...") has this design's figures.
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
//    inherits one held by a thread that does not exist in it. The ring pool's lock likewise.
//  - A ring block is handed out only by the ring's owner, and only when its state word says
//    free; the owner marks it in use before returning it, and only a free of that block marks
//    it free again. So a block is never in two tasks at once, and whatever its last task did
//    happens before its next one is built in it (release store, acquire load).
//  - A ring has at most one owner. Owners change only through the ring pool's lock: a thread
//    gives its rings back when it exits, blocks in use and all; the next owner passes over
//    those until they are freed. Rings are never unmapped, since any block may be freed at any
//    time. They are cut from one reservation of k_region_bytes (address space; a page is
//    backed once written), at most k_rings of them; a thread that finds none left uses the
//    magazines for good.
//
// Under AddressSanitizer every call goes straight to the global operators, so that a task used
// after it was freed is still caught.
#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#include "sync/cpu_relax.hpp"
#include "spool/detail/task.hpp"
#include "memory/task_memory_testing.hpp"

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

// ---- Rings: blocks in address order for a thread that allocates more than it frees ----

// One ring is k_ring_bytes of blocks of one class, owned by one thread at a time.
constexpr std::size_t k_ring_bytes = std::size_t{4} << 20;
// The region all rings are cut from: one reservation, so that telling a ring block from any
// other (on every free) is one comparison. Pages are backed only once written.
constexpr std::size_t k_rings = 64;
constexpr std::size_t k_region_bytes = k_rings * k_ring_bytes;
// A thread asks for a ring of a class once it has allocated this many more blocks of the class
// than it freed (a producer whose tasks other threads free). A thread that frees what it
// allocates (a worker running its own tasks) never gets one.
constexpr std::int64_t k_ring_after = 4096;
// Blocks still in use that an allocation passes over before it gives up on the ring...
constexpr std::uint32_t k_ring_tries = 8;
// ...and the allocations that then come from the magazines before the ring is tried again
// (the ring is lapped: more of its blocks are queued or running than it holds).
constexpr std::uint32_t k_ring_rest = 1024;
// How far ahead of the block handed out the ring's next blocks are prefetched, in blocks.
constexpr std::uint32_t k_ring_prefetch = 8;

// The last 4 bytes of a ring block say whether it is free; a task in the block never reaches
// them (a ring block is used only for a task at least 4 bytes smaller).
using ring_state = std::uint32_t;
constexpr ring_state k_block_free = 0;  // what fresh pages hold
constexpr ring_state k_block_used = 1;

constexpr std::uint32_t ring_blocks(std::size_t size_class) noexcept {
  return static_cast<std::uint32_t>(k_ring_bytes / (k_min_size << size_class));
}

std::atomic_ref<ring_state> state_of(void* block, std::size_t size_class) noexcept {
  const std::size_t size = k_min_size << size_class;
  return std::atomic_ref<ring_state>(
      *reinterpret_cast<ring_state*>(static_cast<char*>(block) + size - sizeof(ring_state)));
}

// The class a task of `size` bytes uses in a ring (with room for the state), or k_classes if
// it is too large for any.
constexpr std::size_t ring_class_of(std::size_t size) noexcept {
  return size + sizeof(ring_state) <= k_max_size ? class_of(size + sizeof(ring_state)) : k_classes;
}

// Set once the region is reserved; never unmapped (blocks may be freed until the process ends).
std::atomic<char*> region_base{nullptr};

bool in_ring(const void* p) noexcept {
  const char* base = region_base.load(std::memory_order_relaxed);
  // One unsigned comparison: an address below the region wraps round to a large difference.
  return base != nullptr &&
         reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(base) <
             k_region_bytes;
}

// Hands rings out and takes them back when their threads exit. A ring given back keeps the
// blocks still in use marked so; its next owner passes over them until they are freed.
class ring_pool {
 public:
  static ring_pool& get() noexcept {
    static ring_pool* const pool = new ring_pool;  // never destroyed, like the depots
    return *pool;
  }

  // A ring of the class (one given back, else a fresh one), or null if none is left.
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

// One thread's magazines and rings. Trivially destructible, so it stays usable for the whole
// life of the thread; the thread's `flusher` (below) empties it when the thread exits.
class thread_cache {
  struct slot {
    magazine* loaded = nullptr;
    magazine* spare = nullptr;
    char* ring = nullptr;         // this thread's ring of the class, if it has one
    std::uint32_t ring_pos = 0;   // the ring's next block
    std::uint32_t ring_rest = 0;  // calls left before the ring is tried again
    std::int64_t net = 0;         // blocks allocated minus freed here, counted until a ring
    bool ring_refused = false;    // none was left: do not ask again
  };

 public:
  void* allocate(std::size_t size) {
    if (!armed_) arm();
    const std::size_t rc = ring_class_of(size);
    if (rc < k_classes) {
      slot& r = slots_[rc];
      if (r.ring == nullptr && ++r.net >= k_ring_after && !r.ring_refused) {
        r.ring = ring_pool::get().take(rc);
        r.ring_refused = r.ring == nullptr;
      }
      if (r.ring != nullptr) {
        if (void* b = ring_allocate(r, rc)) return b;
      }
    }
    return from_magazines(class_of(size));
  }

  void deallocate(void* p, std::size_t size) noexcept {
    const std::size_t rc = ring_class_of(size);
    if (rc < k_classes) {
      if (in_ring(p)) {
        // Everything the task did with the block happens before its next owner sees it free.
        state_of(p, rc).store(k_block_free, std::memory_order_release);
        return;
      }
      --slots_[rc].net;
    }
    to_magazines(p, class_of(size));
  }

 private:
  void* from_magazines(std::size_t c) {
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

  void to_magazines(void* p, std::size_t c) noexcept {
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

  // Blocks of this thread's ring of the class come out in address order, each one the ring
  // holds free; null if the next k_ring_tries are all in use (the ring is lapped), and then
  // for the next k_ring_rest calls without looking.
  void* ring_allocate(slot& s, std::size_t c) noexcept {
    if (s.ring_rest != 0) {
      --s.ring_rest;
      return nullptr;
    }
    const std::size_t size = k_min_size << c;
    const std::uint32_t mask = ring_blocks(c) - 1;
    for (std::uint32_t i = 0; i < k_ring_tries; ++i) {
      char* b = s.ring + size * s.ring_pos;
      s.ring_pos = (s.ring_pos + 1) & mask;
      auto state = state_of(b, c);
      // Acquire: the free (release) of the task that held it comes before this use.
      if (state.load(std::memory_order_acquire) == k_block_free) {
        state.store(k_block_used, std::memory_order_relaxed);
        prefetch_for_write(s.ring + size * ((s.ring_pos + k_ring_prefetch) & mask));
        return b;
      }
    }
    s.ring_rest = k_ring_rest;
    return nullptr;
  }

 public:
  // The thread is exiting: its rings go back to the pool of rings; full magazines go to the
  // depot; partly filled ones' blocks, and the magazines the depot does not keep, to the
  // global operators.
  void flush() noexcept {
    for (std::size_t c = 0; c < k_classes; ++c) {
      if (slots_[c].ring != nullptr) ring_pool::get().give_back(slots_[c].ring, c);
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
      slots_[c].ring_refused = true;  // a ring taken after this would never be given back
    }
  }

 private:
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
void hold_depot(std::size_t size) noexcept { depot::of(class_of(size)).mu_.lock(); }
void release_depot(std::size_t size) noexcept { depot::of(class_of(size)).mu_.unlock(); }
std::uint64_t busy_fallbacks() noexcept { return busy_count.load(std::memory_order_relaxed); }
bool in_ring(const void* p) noexcept { return spool::detail::in_ring(p); }
std::size_t ring_after() noexcept { return static_cast<std::size_t>(k_ring_after); }
std::size_t ring_capacity(std::size_t size) noexcept {
  const std::size_t c = ring_class_of(size);
  return c < k_classes ? ring_blocks(c) : 0;
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

void* task::operator new(std::size_t size) {
#if SPOOL_TASK_CACHE
  if (size <= k_max_size) return cache.allocate(size);
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
    cache.deallocate(p, size);
    return;
  }
#endif
  ::operator delete(p, size);
}

}  // namespace spool::detail
