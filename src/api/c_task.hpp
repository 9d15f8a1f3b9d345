// api/c_task.hpp: what the C API's files share: the pool handle and the task around a C function.
#pragma once

#include "core.hpp"
#include "spool/spool.h"

struct spool_pool {
  explicit spool_pool(const spool::config& cfg) : core(cfg) {}
  spool::detail::core core;
};

namespace spool::detail {

// A C function and its argument. on_cancel, if set, hands arg back when the task is dropped.
class c_task final : public task {
 public:
  c_task(void (*fn)(void*), void* arg, void (*on_cancel)(void*)) noexcept
      : fn_(fn), arg_(arg), on_cancel_(on_cancel) {}

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

 private:
  void (*fn_)(void*);
  void* arg_;
  void (*on_cancel_)(void*);
};

inline int to_c(std::error_code ec) noexcept { return ec ? ec.value() : SPOOL_OK; }

}  // namespace spool::detail
