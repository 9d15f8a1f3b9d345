// api/c_task.hpp: what the C API's files share: the pool handle and the task around a C function.
#pragma once

#include "core.hpp"
#include "spool/spool.h"

// A C pool: its core (in a block of its own, lifetime/) and the C++ face that
// spool::this_pool() returns inside its tasks.
struct spool_pool {
  explicit spool_pool(const spool::config& cfg);
  ~spool_pool();
  spool_pool(const spool_pool&) = delete;
  spool_pool& operator=(const spool_pool&) = delete;
  spool::detail::core& core;
  spool::pool face;
};

namespace spool::detail {

// A C function, its argument and its on_cancel hook (null: none), as a C task holds them. A
// task ends through one of the two calls below, which free the task first: its memory is back
// before fn runs (fn may submit more) or on_cancel hands arg back.
struct c_call {
  void (*fn)(void*);
  void* arg;
  void (*on_cancel)(void*);

  template <class Task>
  outcome run_and_free(Task* owner) const noexcept {
    auto f = fn;
    void* a = arg;
    delete owner;  // *this goes with it: only the copies above are used after
    f(a);
    return outcome::completed;
  }
  template <class Task>
  void cancel_and_free(Task* owner) const noexcept {
    auto hook = on_cancel;
    void* a = arg;
    delete owner;
    if (hook != nullptr) hook(a);
  }
};

// A C function and its argument. on_cancel, if set, hands arg back when the task is dropped.
class c_task final : public work_item {
 public:
  c_task(void (*fn)(void*), void* arg, void (*on_cancel)(void*),
         const char* name = nullptr) noexcept
      : call_{fn, arg, on_cancel}, name_(name) {}

  outcome run(core&) noexcept override { return call_.run_and_free(this); }
  void cancel() noexcept override { call_.cancel_and_free(this); }
  void destroy() noexcept override { delete this; }
  const char* name() const noexcept override { return name_; }

 private:
  c_call call_;
  const char* name_;  // spool_submit_named; fits the 64-byte class with the rest
};

inline int to_c(std::error_code ec) noexcept { return ec ? ec.value() : SPOOL_OK; }

}  // namespace spool::detail
