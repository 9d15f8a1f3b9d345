// memory/magazines.cpp: the depot, and the slow paths of a thread's magazine pair (see
// magazines.hpp for the design and its invariants).
#include "memory/magazines.hpp"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <utility>

#if SPOOL_TASK_CACHE

namespace spool::detail::memory {
namespace {

// The depot keeps up to 4 MiB per class: enough to recycle a burst of a hundred thousand
// small tasks (a producer that runs ahead of its workers), small enough to hold for good.
constexpr std::size_t k_depot_bytes = std::size_t{4} << 20;
constexpr std::uint32_t depot_batches(std::size_t size_class) noexcept {
  return static_cast<std::uint32_t>(k_depot_bytes / (k_batch * block_size(size_class)));
}
// The depot's stack bound for empty magazines, per class.
constexpr std::uint32_t k_depot_empties = 64;

std::atomic<std::uint64_t> busy_count{0};  // depot_busy_count

void free_blocks(magazine* m, std::size_t size_class) noexcept {
  const std::size_t size = block_size(size_class);
  for (std::uint32_t i = 0; i < m->count; ++i) ::operator delete(m->blocks[i], size);
  m->count = 0;
}

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
  std::mutex& mutex() noexcept { return mu_; }

 private:
  static void lock_all() noexcept;
  static void unlock_all() noexcept;
  // The lock if it is free now or within a few tries. Nobody sleeps on the depot: its holder
  // may be a thread the kernel has just preempted, and a waiter would then sleep for the
  // holder's whole time slice. A thread that cannot get the lock uses the global operators
  // for this one block instead.
  bool try_lock_briefly() noexcept;

  std::mutex mu_;
  magazine* full_ = nullptr;       // guarded by mu_
  std::uint32_t full_count_ = 0;   // guarded by mu_
  magazine* empty_ = nullptr;      // guarded by mu_
  std::uint32_t empty_count_ = 0;  // guarded by mu_
};

depot* depots[k_classes];

depot& depot::of(std::size_t size_class) noexcept {
  // Built once, all classes together, and never destroyed (see the invariants).
  static const bool built = [] {
    // Once per process; out of memory this early ends it (noexcept).
    for (auto& d : depots) d = new depot;  // NOLINT(bugprone-unhandled-exception-at-new)
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

// Fills the empty magazine `m` from the global operator. Throws std::bad_alloc only if not
// even one block could be had; the blocks already in `m` stay there.
void refill(magazine& m, std::size_t c) {
  const std::size_t size = block_size(c);
  m.blocks[m.count++] = ::operator new(size);
  while (!m.full()) {
    void* b = ::operator new(size, std::nothrow);
    if (b == nullptr) break;
    m.blocks[m.count++] = b;
  }
}

}  // namespace

bool magazine_pair::reload(std::size_t c) {
  if (spare_ != nullptr && !spare_->empty()) {
    std::swap(loaded_, spare_);
    return true;
  }
  magazine* full = depot::of(c).trade_for_full(loaded_);
  if (full == nullptr) {
    // None to be had (the blocks this thread handed out are still in the workers' magazines,
    // or the depot is busy): a magazine's worth from the global operator, so that this thread
    // asks the depot again only k_batch blocks later, not on every allocation (which would
    // keep the depot's lock contended while it is dry).
    if (loaded_ == nullptr) loaded_ = new (std::nothrow) magazine;
    if (loaded_ == nullptr) return false;
    refill(*loaded_, c);
    return true;
  }
  loaded_ = full;
  // The whole magazine was most likely freed on another core: start moving the first blocks'
  // lines here (the steady-state prefetch in allocate() covers the rest).
  for (std::uint32_t i = 1; i < k_prefetch_ahead && i < full->count; ++i) {
    prefetch_for_write(full->blocks[full->count - 1 - i]);
  }
  return true;
}

bool magazine_pair::make_room(std::size_t c) noexcept {
  if (spare_ == nullptr || !spare_->full()) {
    std::swap(loaded_, spare_);
    if (loaded_ == nullptr) loaded_ = new (std::nothrow) magazine;
  } else {
    // Both magazines are full: the spare goes to the depot for an empty one.
    auto [empty, busy] = depot::of(c).trade_for_empty(spare_, c, false);
    if (busy) return false;
    spare_ = loaded_;
    loaded_ = empty;
  }
  return loaded_ != nullptr;
}

void magazine_pair::flush(std::size_t c) noexcept {
  for (magazine* m : {loaded_, spare_}) {
    if (m == nullptr) continue;
    if (m->full()) {
      depot::of(c).trade_for_empty(m, c, true);
    } else {
      free_blocks(m, c);
      delete m;
    }
  }
  loaded_ = nullptr;
  spare_ = nullptr;
}

void lock_depot(std::size_t c) noexcept { depot::of(c).mutex().lock(); }
void unlock_depot(std::size_t c) noexcept { depot::of(c).mutex().unlock(); }
std::uint64_t depot_busy_count() noexcept { return busy_count.load(std::memory_order_relaxed); }

}  // namespace spool::detail::memory

#endif  // SPOOL_TASK_CACHE
