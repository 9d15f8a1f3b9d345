// spool/detail/named.hpp: a callable with a name for tracing (spool::named), and how a task
// finds the name of the callable it holds. Internal: users call spool::named.
#pragma once

#include <functional>
#include <type_traits>
#include <utility>

namespace spool::detail {

// A callable and a name: calls go to fn, with the same arguments and value category.
template <class F>
struct named_fn {
  const char* name;
  F fn;

  template <class... A>
  auto operator()(A&&... args) & -> decltype(std::invoke(fn, std::forward<A>(args)...)) {
    return std::invoke(fn, std::forward<A>(args)...);
  }
  template <class... A>
  auto operator()(A&&... args) const& -> decltype(std::invoke(fn, std::forward<A>(args)...)) {
    return std::invoke(fn, std::forward<A>(args)...);
  }
  template <class... A>
  auto operator()(A&&... args) && -> decltype(std::invoke(std::move(fn),
                                                          std::forward<A>(args)...)) {
    return std::invoke(std::move(fn), std::forward<A>(args)...);
  }
};

template <class F>
struct is_named : std::false_type {};
template <class F>
struct is_named<named_fn<F>> : std::true_type {};
template <class F>
inline constexpr bool is_named_v = is_named<std::remove_cvref_t<F>>::value;

// The name a task reports to config::on_task_start/on_task_finish: its callable's, or null.
template <class F>
const char* name_of(const F& f) noexcept {
  if constexpr (is_named_v<F>) {
    return f.name;
  } else {
    return nullptr;
  }
}

// The name of a task whose callable may be destroyed before the task is (a future's task,
// which releases its callable as soon as it has run or is cancelled): copied at construction
// if F has one, and no storage at all otherwise ([[no_unique_address]] at the use), so an
// unnamed future task keeps its size.
template <class F, bool = is_named_v<F>>
struct name_slot {
  explicit name_slot(const char*) noexcept {}
  const char* get() const noexcept { return nullptr; }
};
template <class F>
struct name_slot<F, true> {
  explicit name_slot(const char* n) noexcept : name(n) {}
  const char* get() const noexcept { return name; }
  const char* name;
};

}  // namespace spool::detail
