// spool/default_pool.hpp: the process-wide pool.
#pragma once

#include "spool/pool.hpp"

namespace spool {

// A pool for the whole process, created on first use (thread-safe) with default settings: a
// fixed pool of one worker per CPU this process may use, named "spool-def". At exit (an
// atexit handler registered at creation) it is shut down draining: queued tasks run, the
// threads are joined. The object itself is never freed, so code running after that (a static
// object's destructor whose object was constructed before the pool's first use) still gets a
// valid pool, one that refuses submissions with errc::shut_down; a static destructor that
// runs before the handler finds the pool working. exit() called from one of its tasks leaves
// its threads running while the process ends (a worker cannot join itself).
pool& default_pool();

}  // namespace spool
