// api/default_pool.hpp: the process-wide pool behind spool::default_pool() and
// spool_default_pool() (default_pool.cpp).
#pragma once

struct spool_pool;

namespace spool::detail {

// The C API's face of the process-wide pool, created on first use.
spool_pool* default_c_pool();
// Whether p (or c) is that pool: every call that would end it (spool_destroy,
// spool_shutdown, spool_close; pool::close, shutdown, shutdown_until) refuses it.
bool is_default_pool(const spool_pool* p) noexcept;
class core;
bool is_default_core(const core* c) noexcept;

}  // namespace spool::detail
