// spool/spool.hpp: the C++ API of libspool, a producer-consumer thread pool, in one include.
//
//   spool::pool pool{spool::config{.threads = 4, .queue_capacity = 1024}};
//   auto answer = pool.submit([](int x) { return x * 2; }, 21);   // spool::future<int>
//   pool.post([] { do_something(); });                            // fire and forget
//   int v = answer.get();                                          // 42
//   pool.wait_idle();
//
// One header per concept; each may be included alone:
//   spool/pool.hpp          spool::pool (submit, post, timers, shutdown, run-time control),
//                           this_worker_index(), this_pool(); its hazards are listed there
//   spool/config.hpp        spool::config, full_policy, scale_event, task_info, task_end
//   spool/stats.hpp         spool::stats, what pool::statistics() returns
//   spool/shutdown.hpp      shutdown_mode, shutdown_report
//   spool/default_pool.hpp  default_pool(), the process-wide pool
//   spool/placement.hpp     allowed_cpus(), topology_aware() (config::affinity)
//   spool/blocking.hpp      blocking_region (elastic pools compensate a blocked worker)
//   spool/isolate.hpp       isolate() (a waiting worker runs only its region's tasks)
//   spool/named.hpp         named() (a task's name for the tracing hooks)
//   spool/future.hpp        future, shared_future, promise, when_all, when_any
//   spool/timer.hpp         timer (post_after, post_at, post_every)
//   spool/priority.hpp      priority
//   spool/error.hpp         error, errc, task_cancelled
// Not included here: spool/task_group.hpp, spool/parallel.hpp, spool/coro.hpp (coroutines),
// spool/queue.hpp (the durable job queue), spool/spool.h (the C API), spool/tpool.h.
#pragma once

#include "spool/blocking.hpp"
#include "spool/config.hpp"
#include "spool/default_pool.hpp"
#include "spool/error.hpp"
#include "spool/future.hpp"
#include "spool/isolate.hpp"
#include "spool/named.hpp"
#include "spool/placement.hpp"
#include "spool/pool.hpp"
#include "spool/priority.hpp"
#include "spool/shutdown.hpp"
#include "spool/stats.hpp"
#include "spool/timer.hpp"
