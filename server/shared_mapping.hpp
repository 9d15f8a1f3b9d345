// shared_mapping.hpp: one object, or an array of them, in an anonymous MAP_SHARED mapping.
// Processes forked after it is made see the same objects, so their atomics (which must be
// lock-free, hence address-free) count or publish across them: the metrics of the forking
// models, the Redis store's reconnect times, preforked's worker counts, the per-client counts
// its workers share.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <memory>
#include <new>
#include <system_error>
#include <type_traits>

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

// `count` value-initialised objects of T in one fresh shared mapping. T is trivially
// destructible (lock-free atomics): unmapping runs no destructors.
template <class T>
class shared_array {
  static_assert(std::is_trivially_destructible_v<T>);

 public:
  // Throws std::system_error naming `what` if the mapping cannot be made.
  shared_array(std::size_t count, const char* what) : count_(count) {
    void* p = ::mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), what);
    data_ = static_cast<T*>(p);
    for (std::size_t i = 0; i < count_; ++i) new (data_ + i) T();
  }
  ~shared_array() { ::munmap(data_, bytes()); }
  shared_array(const shared_array&) = delete;
  shared_array& operator=(const shared_array&) = delete;

  [[nodiscard]] T* data() const noexcept { return data_; }
  T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  std::size_t count_;
  T* data_ = nullptr;
};

}  // namespace spoold
