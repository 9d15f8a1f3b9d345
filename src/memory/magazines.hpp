// memory/magazines.hpp: the general allocator of task memory: per-thread magazines traded
// through a shared depot.
//
// Why: a task is usually allocated by the thread that submits it and freed by the worker that
// runs it. Through malloc that pattern is slow: the worker's free lands in its own small cache
// until that overflows, then in the submitter's arena, and the submitter, whose own cache never
// refills, takes the arena lock on nearly every allocation.
//
// How: free blocks of a class are held in *magazines*, arrays of up to k_batch block
// addresses. Each thread keeps two magazines per class (a loaded one and a spare, as in
// Bonwick's magazine layer). A thread that frees more than it allocates (a worker) fills
// magazines and hands full ones to a shared depot; a thread that allocates more than it frees
// (a producer) swaps its empty magazine for a full one. So the depot's lock is taken once per
// k_batch tasks, not per task.
//
// Nobody waits for the depot. Its lock is tried a few times and then given up: the holder may
// be a thread the kernel preempted (a pool with more threads than cores), and a waiter would
// sleep for the holder's time slice. A producer that gets nothing (the depot busy, or dry
// because its blocks are still in the workers' magazines) fills its magazine from the global
// operator new, so it asks again only k_batch blocks later; a thread freeing into two full
// magazines gives that one block to the global operator delete.
//
// Why arrays and not a chain through the blocks: a block handed over was last written by the
// worker that ran its task, on another core. Popping from a chain reads the block to find the
// next one, a cache miss on the submitter's critical path every time. Popping from an array
// reads only the array, and the addresses of the next few blocks are known in advance, so they
// are prefetched for writing while the caller builds the current task.
//
// Invariants:
//  - Every address in a magazine is unused memory of its class's size that came from the
//    global operator new; it goes back to the global operator delete only when the depot is
//    full, when a thread exits with a partly filled magazine, or (one block) when a thread
//    with two full magazines finds the depot busy.
//  - The depot holds only full magazines (exactly k_batch blocks), at most k_depot_bytes of
//    blocks per class, and at most k_depot_empties empty magazines per class.
//  - A thread holds at most two magazines per class; they go to the depot when it exits.
//  - The depot is never destroyed (threads may exit after static destructors have run), so its
//    memory is still reachable at exit, not leaked.
//  - fork(): the depots' locks are taken around fork() (pthread_atfork), so a child never
//    inherits one held by a thread that does not exist in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include "memory/size_classes.hpp"
#include "sync/cpu_relax.hpp"

namespace spool::detail::memory {

constexpr std::uint32_t k_batch = 64;
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

// One thread's two magazines of one class: `loaded`, which blocks come from and go to, and
// `spare`. Only the owning thread touches them.
class magazine_pair {
 public:
  // A block of class c. Throws std::bad_alloc only if the global operator new does.
  void* allocate(std::size_t c) {
    if (loaded_ == nullptr || loaded_->empty()) {
      if (!reload(c)) return ::operator new(block_size(c));
    }
    magazine& m = *loaded_;
    void* b = m.blocks[--m.count];
    // The caller writes this block now; the one k_prefetch_ahead pops later is started here.
    if (m.count >= k_prefetch_ahead) prefetch_for_write(m.blocks[m.count - k_prefetch_ahead]);
    return b;
  }

  // Takes back a block of class c.
  void deallocate(void* p, std::size_t c) noexcept {
    if (loaded_ == nullptr || loaded_->full()) {
      if (!make_room(c)) {
        ::operator delete(p, block_size(c));
        return;
      }
    }
    loaded_->blocks[loaded_->count++] = p;
  }

  // The thread is exiting: full magazines go to the depot; partly filled ones' blocks, and the
  // magazines the depot does not keep, to the global operators.
  void flush(std::size_t c) noexcept;

 private:
  // Makes `loaded` non-empty: the spare, a full magazine from the depot, or one filled from
  // the global operator new. False if no magazine could be had at all.
  bool reload(std::size_t c);
  // Makes `loaded` not full: the spare, or an empty magazine traded for the full spare. False
  // if none could be had (the depot busy, or no memory): the block goes back at once.
  bool make_room(std::size_t c) noexcept;

  magazine* loaded_ = nullptr;
  magazine* spare_ = nullptr;
};

// Testing hooks (task_memory_testing.hpp): the depot lock of a class, and how often a thread
// found a depot busy.
void lock_depot(std::size_t c) noexcept;
void unlock_depot(std::size_t c) noexcept;
std::uint64_t depot_busy_count() noexcept;

}  // namespace spool::detail::memory
