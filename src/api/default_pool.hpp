// api/default_pool.hpp: the process-wide pool behind spool::default_pool() and
// spool_default_pool() (default_pool.cpp).
#pragma once

struct spool_pool;

namespace spool::detail {

// The C API's face of the process-wide pool, created on first use.
spool_pool* default_c_pool();
// Whether p is that pool (spool_destroy and spool_shutdown refuse it).
bool is_default_pool(const spool_pool* p) noexcept;

}  // namespace spool::detail
