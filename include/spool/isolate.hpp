// spool/isolate.hpp: isolation regions, which keep a waiting worker to the tasks of its own
// region.
#pragma once

#include <functional>
#include <utility>

#include "spool/detail/isolation.hpp"

namespace spool {

// Runs f() and returns what it returns (or lets its exception through), in an isolation
// region of its own. A worker that waits (future::get/wait, task_group::wait, a fork's join)
// runs other tasks meanwhile; inside the region, such a wait runs only tasks submitted within
// the region and their descendants, never unrelated tasks. That removes the help-while-wait
// deadlock: a task that waits, say, on a future and only afterwards counts down a latch that
// another task waits at can no longer end up running that other task under its own wait.
//
//  - A task submitted from a worker belongs to the region the worker is in: the region of the
//    task it runs, or the innermost isolate() open on it. Its descendants inherit that region.
//  - An isolate() nested in a region opens a new region: tasks submitted in the inner one are
//    not the outer one's (as oneTBB's this_task_arena::isolate); the outer region's waits
//    leave them to other workers.
//  - An isolated wait takes its region's tasks from the worker's own deque (passing over
//    others' tasks there) and from the shared queue (high and low priorities); it does not
//    steal from other workers. A region task another worker holds is run by that worker, or
//    by an idle one, as any task is.
//  - Only the isolated wait is restricted: the worker's main loop still takes any task, and
//    tasks of a region may be run by any worker.
//  - Off a pool worker (a thread outside the pool) f() just runs: such a thread's waits block
//    without running tasks anyway.
// isolate() itself costs two stores to the worker's slot and one relaxed atomic increment.
template <class F>
decltype(auto) isolate(F&& f) {
  struct region {
    detail::region_id outer = detail::isolation_enter();
    region() noexcept = default;
    region(const region&) = delete;
    region& operator=(const region&) = delete;
    ~region() { detail::isolation_leave(outer); }
  } scope;
  return std::invoke(std::forward<F>(f));
}

}  // namespace spool
