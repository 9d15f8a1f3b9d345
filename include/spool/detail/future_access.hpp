// spool/detail/future_access.hpp: what the library's own code needs of a future: its state
// (future_access), the continuation then() attaches (attach), ready futures. Internal: users
// never name these.
#pragma once

#include <exception>
#include <type_traits>
#include <utility>

#include "spool/detail/callable.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/error.hpp"
#include "spool/priority.hpp"

namespace spool {

class pool;
template <class T>
class future;
template <class T>
class shared_future;

namespace detail {

// The pool as futures refer to it (src/api/pool.cpp).
pool_ref ref_of(pool& p) noexcept;

// Library-internal access to a future's state.
template <class T>
struct future_access {
  static state<T>& state_of(future<T>& f) noexcept { return *f.state_; }
  static state<T>& state_of(const shared_future<T>& f) noexcept { return *f.state_; }
  // A future or shared_future around s, taking over one reference.
  static future<T> make(state<T>* s) noexcept { return future<T>(s); }
  static shared_future<T> make_shared(state<T>* s) noexcept { return shared_future<T>(s); }
  // The state of f, with f's reference; f is left empty.
  static state<T>* release(future<T>& f) noexcept { return std::exchange(f.state_, nullptr); }
  // A future whose get() must leave its task to the workers, never run it on the waiting
  // thread (detail/parallel_support.hpp: an algorithm's whole run forks on a worker).
  static void keep_on_workers(future<T>& f) noexcept {
    if (f.state_ != nullptr) f.state_->keep_on_workers();
  }
};

// The continuation then(), then_try() or then_error() attaches, and its future.
template <class Src, bool Shared, then_kind Kind, class F>
auto attach(state<Src>& source, pool_ref where, priority p, bool run_inline, F&& f) {
  using G = std::decay_t<F>;
  using call = then_call<Src, G, Shared, Kind>;
  if constexpr (Kind == then_kind::value) {
    static_assert(call::ok,
                  "spool: then(f) needs f callable with the future's value (T, T&& or T&; "
                  "const T& for a shared_future) or with nothing for a void future");
  } else if constexpr (Kind == then_kind::outcome) {
    static_assert(call::ok,
                  "spool: then_try(f) needs f callable with the ready future "
                  "(spool::future<T>, or spool::shared_future<T> for a shared one)");
  } else {
    static_assert(call::ok,
                  "spool: then_error(f) needs f callable with std::exception_ptr, or with one "
                  "exception type (a non-generic f taking const E&)");
    static_assert(call::returns_source_type,
                  "spool: then_error(f) needs f to return the future's value type (or a "
                  "future of it)");
  }
  using U = then_result_t<Src, G, Shared, Kind>;
  check_callable(f);
  auto* t =
      new then_task<Src, G, U, Shared, Kind>(&source, where, p, run_inline, std::forward<F>(f));
  state<U>* out = t;
  source.continue_with(t);  // the continuation holds the source's reference it was given
  return future_access<U>::make(out);
}

// The states behind make_ready_future and make_exceptional_future (spool/future.hpp).
template <class T, class... A>
future<T> ready_future(pool_ref owner, A&&... args) {
  auto* s = new promise_state<T>(owner);
  s->set_value(std::forward<A>(args)...);
  s->release();  // two references: the promise's (unused here) and the future's
  return future_access<T>::make(s);
}
template <class T>
future<T> exceptional_future(pool_ref owner, std::exception_ptr e) {
  if (!e) throw error(errc::invalid_argument, "spool::make_exceptional_future: null exception");
  auto* s = new promise_state<T>(owner);
  s->set_exception(std::move(e));
  s->release();
  return future_access<T>::make(s);
}

}  // namespace detail
}  // namespace spool
