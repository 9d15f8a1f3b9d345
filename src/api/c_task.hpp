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

// A C function and its argument. on_cancel, if set, hands arg back when the task is dropped.
class c_task final : public task {
 public:
  c_task(void (*fn)(void*), void* arg, void (*on_cancel)(void*),
         const char* name = nullptr) noexcept
      : fn_(fn), arg_(arg), on_cancel_(on_cancel), name_(name) {}

  outcome run(core&) noexcept override {
    auto fn = fn_;
    void* arg = arg_;
    delete this;
    fn(arg);
    return outcome::completed;
  }
  void cancel() noexcept override {
    auto hook = on_cancel_;
    void* arg = arg_;
    delete this;
    if (hook != nullptr) hook(arg);
  }
  void destroy() noexcept override { delete this; }
  const char* name() const noexcept override { return name_; }

 private:
  void (*fn_)(void*);
  void* arg_;
  void (*on_cancel_)(void*);
  const char* name_;  // spool_submit_named; fits the 64-byte class with the rest
};

inline int to_c(std::error_code ec) noexcept { return ec ? ec.value() : SPOOL_OK; }

}  // namespace spool::detail
