// memory/size_classes.hpp: the block sizes task memory recycles, shared by its two allocators
// (magazines.hpp, rings.hpp) and the per-thread cache that chooses between them
// (task_memory.cpp).
//
// Blocks come in k_classes classes of k_min_size << c bytes; a task larger than k_max_size
// uses the global operator new. Under AddressSanitizer nothing is recycled
// (SPOOL_TASK_CACHE is 0): every task goes to the global operators, so that a task used after
// it was freed is still caught.
#pragma once

#include <cstddef>

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

namespace spool::detail::memory {

constexpr std::size_t k_classes = 4;
constexpr std::size_t k_min_size = 32;  // class c holds blocks of k_min_size << c bytes
constexpr std::size_t k_max_size = k_min_size << (k_classes - 1);

constexpr std::size_t block_size(std::size_t size_class) noexcept {
  return k_min_size << size_class;
}

// Index of the smallest class that fits `size` (size <= k_max_size).
constexpr std::size_t class_of(std::size_t size) noexcept {
  std::size_t c = 0;
  while (block_size(c) < size) ++c;
  return c;
}

}  // namespace spool::detail::memory
