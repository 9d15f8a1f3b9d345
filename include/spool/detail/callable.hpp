// spool/detail/callable.hpp: the checks every submission makes of its callable.
// Internal: users never name these.
#pragma once

#include <functional>
#include <type_traits>

#include "spool/detail/named.hpp"
#include "spool/error.hpp"

namespace spool::detail {

template <class F>
struct is_std_function : std::false_type {};
template <class Sig>
struct is_std_function<std::function<Sig>> : std::true_type {};

// A callable that can be null (a function or member pointer, an empty std::function) must not
// be: submitting it would call through null on a worker. errc::invalid_argument instead.
template <class F>
void check_callable(const F& f) {
  using G = std::remove_cvref_t<F>;  // a function (not a pointer to one) is never null
  if constexpr (is_named_v<G>) {
    check_callable(f.fn);
  } else if constexpr (std::is_pointer_v<G> || std::is_member_pointer_v<G>) {
    if (f == nullptr) throw error(errc::invalid_argument, "spool: a null function pointer");
  } else if constexpr (is_std_function<G>::value) {
    if (!f) throw error(errc::invalid_argument, "spool: an empty std::function");
  }
}
template <class F>
bool is_null_callable(const F& f) noexcept {
  using G = std::remove_cvref_t<F>;
  if constexpr (is_named_v<G>) {
    return is_null_callable(f.fn);
  } else if constexpr (std::is_pointer_v<G> || std::is_member_pointer_v<G>) {
    return f == nullptr;
  } else if constexpr (is_std_function<G>::value) {
    return !f;
  } else {
    return false;
  }
}

}  // namespace spool::detail
