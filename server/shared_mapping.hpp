// shared_mapping.hpp: one object in an anonymous MAP_SHARED mapping. Processes forked after it
// is made see the same object, so its atomics (which must be lock-free, hence address-free)
// count or publish across them: the metrics of the forking models, the Redis store's
// reconnect times.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <memory>
#include <new>
#include <system_error>

namespace spoold {

template <class T>
struct shared_mapping_unmapper {
  void operator()(T* object) const noexcept {
    object->~T();
    ::munmap(object, sizeof(T));
  }
};

template <class T>
using shared_mapping = std::unique_ptr<T, shared_mapping_unmapper<T>>;

// A value-initialised T in a fresh shared mapping. Throws std::system_error naming `what` if
// the mapping cannot be made.
template <class T>
shared_mapping<T> make_shared_mapping(const char* what) {
  void* p = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), what);
  return shared_mapping<T>(new (p) T());
}

}  // namespace spoold
