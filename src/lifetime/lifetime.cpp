// lifetime/lifetime.cpp: cores in blocks that outlive them, and pins (README.md beside this
// file gives the argument).
#include "lifetime/lifetime.hpp"

#include <climits>
#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

#include "core.hpp"
#include "sleep/futex.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SPOOL_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define SPOOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define SPOOL_POISON(p, n) ((void)(p), (void)(n))
#define SPOOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace spool::detail {
namespace {

// The block's first cache line; the core follows it.
struct alignas(64) header {
  std::atomic<std::uint32_t> incarnation{0};  // odd: a core lives here
  std::atomic<std::uint32_t> pins{0};         // threads holding a pin on the core
  std::atomic<std::uint32_t> spin_rounds{0};  // the core's config::spin_rounds
};

constexpr std::size_t k_core_offset = sizeof(header);
static_assert(k_core_offset % alignof(core) == 0);
constexpr std::size_t k_block_size = k_core_offset + sizeof(core);
constexpr std::align_val_t k_block_align{alignof(header) > alignof(core) ? alignof(header)
                                                                         : alignof(core)};

header& header_of(const core* c) noexcept {
  return *reinterpret_cast<header*>(
      const_cast<char*>(reinterpret_cast<const char*>(c) - k_core_offset));
}

// Blocks whose pool was destroyed. Never freed (nor is the list), so a header stays readable
// for as long as the process runs; the list holds at most as many blocks as pools ever lived
// at once.
struct spare_blocks {
  std::mutex mu;
  std::vector<void*> blocks;
};
spare_blocks& spares() {
  static spare_blocks* const s = new spare_blocks;
  return *s;
}

void* take_block() {
  {
    spare_blocks& s = spares();
    std::lock_guard lock(s.mu);
    if (!s.blocks.empty()) {
      void* b = s.blocks.back();
      s.blocks.pop_back();
      return b;
    }
  }
  void* b = ::operator new(k_block_size, k_block_align);
  ::new (b) header;
  return b;
}

void keep_block(void* b) noexcept {
  spare_blocks& s = spares();
  std::lock_guard lock(s.mu);
  try {
    s.blocks.push_back(b);
  } catch (...) {
    // No room in the list: the block stays allocated and unlisted (its header must stay
    // readable), which costs its memory and nothing else.
  }
}

}  // namespace

core* create_core(const config& cfg) {
  void* block = take_block();
  header& h = *static_cast<header*>(block);
  char* at = static_cast<char*>(block) + k_core_offset;
  SPOOL_UNPOISON(at, sizeof(core));
  h.spin_rounds.store(cfg.spin_rounds, std::memory_order_relaxed);
  const std::uint32_t stamp = h.incarnation.fetch_add(1, std::memory_order_seq_cst) + 1;
  try {
    return ::new (at) core(cfg, stamp);
  } catch (...) {
    h.incarnation.fetch_add(1, std::memory_order_seq_cst);
    SPOOL_POISON(at, sizeof(core));
    keep_block(block);
    throw;
  }
}

void destroy_core(core* c) noexcept {
  header& h = header_of(c);
  // From here no pin succeeds (seq_cst, paired with pin's increment then load: either the
  // pinner sees the new incarnation and backs out, or this thread sees its pin below).
  h.incarnation.fetch_add(1, std::memory_order_seq_cst);
  for (std::uint32_t n = h.pins.load(std::memory_order_seq_cst); n != 0;
       n = h.pins.load(std::memory_order_seq_cst)) {
    futex_wait(h.pins, n);
  }
  c->~core();
  char* at = reinterpret_cast<char*>(c);
  SPOOL_POISON(at, sizeof(core));
  keep_block(at - k_core_offset);
}

unsigned waiter_spin_rounds(const core* c) noexcept {
  return header_of(c).spin_rounds.load(std::memory_order_relaxed);
}

pin::pin(pool_ref ref) noexcept {
  if (ref.owner == nullptr) return;
  header& h = header_of(ref.owner);
  h.pins.fetch_add(1, std::memory_order_seq_cst);
  if (h.incarnation.load(std::memory_order_seq_cst) == ref.stamp) {
    held_ = ref.owner;
    return;
  }
  if (h.pins.fetch_sub(1, std::memory_order_seq_cst) == 1) futex_wake(h.pins, INT_MAX);
}

pin::~pin() {
  if (held_ == nullptr) return;
  header& h = header_of(held_);
  // The last pin wakes a destroyer, which can only be waiting once the incarnation moved; the
  // same pairing as above says that a destroyer which read the count before this decrement
  // is seen here.
  if (h.pins.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      (h.incarnation.load(std::memory_order_seq_cst) & 1) == 0) {
    futex_wake(h.pins, INT_MAX);
  }
}

}  // namespace spool::detail
