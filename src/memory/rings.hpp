// memory/rings.hpp: the producers' allocator of task memory: rings of blocks handed out in
// address order.
//
// Why: magazines (magazines.hpp) hand a producer back the blocks in the order the workers freed
// them, which after a few rounds through many workers' magazines and the depot is no order at
// all: every new task lands on a line that some other core holds, at an address no hardware
// prefetcher can guess. Handing a producer its blocks in address order, from memory it reuses,
// lets the prefetchers run ahead of it.
//
// How: a thread that has allocated k_ring_after more blocks of a class than it freed (a
// producer whose tasks others free) takes a *ring* for that class: k_ring_bytes of blocks that
// it hands out strictly in address order, going round. The last 4 bytes of a ring block are its
// state word (free / in use), so a ring takes tasks at least 4 bytes smaller than its class.
// Freeing a ring block is one release store to that word, on a line the freeing worker already
// holds (it just ran the task); the producer's acquire load of the word, when it comes round,
// is the only hand-over. A block still in use when the producer comes round (a long task, or a
// backlog longer than the ring) is passed over; after k_ring_tries such blocks in a row, the
// next k_ring_rest allocations come from the magazines. On its first lap through a ring the
// owner backs the ring's pages k_ring_populate_bytes ahead at a time (populate_ring): left to
// the first writes, a page fault would land on one post in every page's worth of blocks (64
// posts of 64-byte tasks), about a thousand of them per ring, each several microseconds.
//
// Invariants:
//  - A ring block is handed out only by the ring's owner, and only when its state word says
//    free; the owner marks it in use before returning it, and only a free of that block marks
//    it free again. So a block is never in two tasks at once, and whatever its last task did
//    happens before its next one is built in it (release store, acquire load).
//  - A ring has at most one owner. Owners change only through the ring pool's lock: a thread
//    gives its rings back when it exits, blocks in use and all; the next owner passes over
//    those until they are freed. Rings are never unmapped, since any block may be freed at any
//    time. They are cut from one reservation of k_region_bytes (address space; a page is
//    backed once populated or written), at most k_rings of them; a thread that finds none left
//    uses the magazines for good. Populating leaves a page already backed as it is, so a ring
//    taken again, with blocks still in use, loses nothing.
//  - fork(): the ring pool's lock is taken around fork() (pthread_atfork).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "memory/size_classes.hpp"
#include "sync/cpu_relax.hpp"

namespace spool::detail::memory {

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
// A ring's pages are backed ahead of its owner's first lap this many bytes at a time
// (populate_ring), so that the lap costs k_ring_bytes / k_ring_populate_bytes system calls
// instead of a page fault every page's worth of blocks, each on the path of one post.
constexpr std::size_t k_ring_populate_bytes = std::size_t{256} << 10;

// The last 4 bytes of a ring block say whether it is free; a task in the block never reaches
// them (a ring block is used only for a task at least 4 bytes smaller).
using ring_state = std::uint32_t;
constexpr ring_state k_block_free = 0;  // what fresh pages hold
constexpr ring_state k_block_used = 1;

constexpr std::uint32_t ring_blocks(std::size_t size_class) noexcept {
  return static_cast<std::uint32_t>(k_ring_bytes / block_size(size_class));
}

inline std::atomic_ref<ring_state> state_of(void* block, std::size_t size_class) noexcept {
  return std::atomic_ref<ring_state>(*reinterpret_cast<ring_state*>(
      static_cast<char*>(block) + block_size(size_class) - sizeof(ring_state)));
}

// The class a task of `size` bytes uses in a ring (with room for the state), or k_classes if
// it is too large for any.
constexpr std::size_t ring_class_of(std::size_t size) noexcept {
  return size + sizeof(ring_state) <= k_max_size ? class_of(size + sizeof(ring_state)) : k_classes;
}

// Set once the region is reserved; never unmapped (blocks may be freed until the process ends).
extern std::atomic<char*> region_base;

inline bool in_ring(const void* p) noexcept {
  const char* base = region_base.load(std::memory_order_relaxed);
  // One unsigned comparison: an address below the region wraps round to a large difference.
  return base != nullptr &&
         reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(base) <
             k_region_bytes;
}

// Frees a ring block of class c: everything its task did happens before its next owner sees
// it free.
inline void free_ring_block(void* p, std::size_t c) noexcept {
  state_of(p, c).store(k_block_free, std::memory_order_release);
}

// Hands rings out and takes them back when their threads exit (rings.cpp).
// A ring of the class (one given back, else a fresh one), or null if none is left.
char* take_ring(std::size_t size_class) noexcept;
void give_back_ring(char* ring, std::size_t size_class) noexcept;
// Backs the pages of [p, p + bytes) of a ring (madvise MADV_POPULATE_WRITE, which leaves pages
// already backed as they are, contents included); where the kernel does not offer it, nothing,
// and the pages are backed by the first writes as before.
void populate_ring(char* p, std::size_t bytes) noexcept;

// One thread's ring of one class, and what decides whether it takes one. Only the owning
// thread touches it.
class ring_cursor {
 public:
  // Counts an allocation of class c, taking a ring once the thread has allocated k_ring_after
  // more than it freed; then a block of the ring, or null (no ring, or the ring is lapped).
  void* allocate(std::size_t c) noexcept {
    if (ring_ == nullptr) {
      if (++net_ < k_ring_after || refused_) return nullptr;
      ring_ = take_ring(c);
      refused_ = ring_ == nullptr;
      if (ring_ == nullptr) return nullptr;
    }
    return next_block(c);
  }
  // A block of class c that is not a ring block was freed on this thread.
  void note_free() noexcept { --net_; }
  // The thread is exiting: the ring goes back, and no ring is taken after this (it would
  // never be given back).
  void flush(std::size_t c) noexcept {
    if (ring_ != nullptr) give_back_ring(ring_, c);
    *this = {};
    refused_ = true;
  }

 private:
  // Blocks come out in address order, each one the ring holds free; null if the next
  // k_ring_tries are all in use (the ring is lapped), and then for the next k_ring_rest calls
  // without looking.
  void* next_block(std::size_t c) noexcept {
    if (rest_ != 0) {
      --rest_;
      return nullptr;
    }
    const std::size_t size = block_size(c);
    const std::uint32_t mask = ring_blocks(c) - 1;
    for (std::uint32_t i = 0; i < k_ring_tries; ++i) {
      char* b = ring_ + size * pos_;
      if (pos_ >= populated_) {  // the first lap only: then populated_ is the ring
        populate_ring(ring_ + size * populated_, k_ring_populate_bytes);
        populated_ += static_cast<std::uint32_t>(k_ring_populate_bytes / size);
      }
      pos_ = (pos_ + 1) & mask;
      auto state = state_of(b, c);
      // Acquire: the free (release) of the task that held it comes before this use.
      if (state.load(std::memory_order_acquire) == k_block_free) {
        state.store(k_block_used, std::memory_order_relaxed);
        prefetch_for_write(ring_ + size * ((pos_ + k_ring_prefetch) & mask));
        return b;
      }
    }
    rest_ = k_ring_rest;
    return nullptr;
  }

  char* ring_ = nullptr;         // this thread's ring of the class, if it has one
  std::uint32_t pos_ = 0;        // the ring's next block
  std::uint32_t rest_ = 0;       // calls left before the ring is tried again
  std::int64_t net_ = 0;         // blocks allocated minus freed here, counted until a ring
  std::uint32_t populated_ = 0;  // blocks from the ring's start populated by this owner
  bool refused_ = false;         // none was left: do not ask again
};

}  // namespace spool::detail::memory
