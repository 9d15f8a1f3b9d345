// inert_task.hpp: a task that does nothing, for benchmarks that push tasks through a queue
// and never run them. Allocated up front, so a benchmark measures the queue, not malloc.
#pragma once

#include "spool/detail/work_item.hpp"

namespace spool_micro {

struct inert_task final : spool::detail::work_item {
  spool::detail::outcome run(spool::detail::core&) noexcept override {
    return spool::detail::outcome::completed;
  }
  void cancel() noexcept override {}
  void destroy() noexcept override {}
};

}  // namespace spool_micro
