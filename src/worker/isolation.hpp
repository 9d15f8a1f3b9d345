// worker/isolation.hpp: spool::isolate on the pool's side: the region a task is queued in, the
// region a worker runs in, and which tasks a wait inside a region may run. Every rule of
// isolation is here, as calls; the search for a region's task is queues::find_isolated, and
// the help-while-wait loop (worker/loop.cpp) asks in_region() how to wait.
//
// Choice: a region the caller opens, as oneTBB's isolate, rather than every wait running only
// its own subtree. A wait does not know its subtree (a future may come from any thread, a
// group's tasks from anywhere), and restricting every wait would take away the help that makes
// waiting cheap and lets unrelated tasks use a waiting worker. So waits help with anything by
// default, and a region is the opt-in for code that waits and only afterwards releases
// something another task may block on.
//
// State: worker::isolation, the region the worker is in (owner only; 0 for none), and
// work_item::isolation, the region a task was queued in.
//
// Invariants:
//  - Every path that queues a task from a worker stamps it with the worker's region
//    (stamp_region): submit, submit_bulk, range tickets, fork_join.
//  - A worker runs a task in the task's region and is back in its own afterwards
//    (region_scope, in core::run_task); isolate() opens a fresh region and restores the outer
//    one on the way out, exception or not (isolation_enter and isolation_leave, isolation.cpp,
//    which says when numbers repeat).
//  - While a worker's region R is not 0, its waits run only tasks tagged R, and the one task
//    it waits for directly, whatever its region (a future's own task: wait_match ->
//    queues::find_isolated; fork_join's own pops of the tasks above its half, which test the
//    two regions in place, api/join.cpp: through a helper here GCC allocated fork_join's
//    pop-back loop worse).
//    Running the awaited task itself can block nothing the wait would not have blocked: the
//    wait cannot return before it ran. Without it, a task that submits b and then waits on b
//    inside a region would wait for good on a one-thread pool, b being in its own deque and of
//    no region. Any other task outside R that the waited-for work depends on is run by another
//    worker, exactly as in a pool whose waits block; so isolation adds no deadlock a blocking
//    pool would not have, and removes the one helping adds.
//  - find_isolated pops past other tasks at the bottom of the worker's own deque and pushes
//    them back, then notifies (they were out of sight), and does not steal. An isolated waiter
//    naps at the far end of the sleepers' list (nap_plan::wake_last), does not spin (most
//    queued tasks are not its region's), and if a submission's wake-up reaches it anyway it
//    passes the wake-up on (wake_for_surplus), so a task it may not run is never left with
//    every other worker asleep.
#pragma once

#include "spool/detail/work_item.hpp"
#include "worker/worker.hpp"

namespace spool::detail {

// t, about to be queued by w, belongs to w's current region.
inline void stamp_region(work_item& t, const worker& w) noexcept { t.isolation = w.isolation; }

// Whether w is inside a region: its waits then run only what wait_match allows.
inline bool in_region(const worker& w) noexcept { return w.isolation != 0; }

// What a wait of w (in a region) may run: the region's tasks and `direct`, the task it waits
// for (may be null).
inline region_match wait_match(const worker& w, const work_item* direct) noexcept {
  return {w.isolation, direct};
}

// w runs a task in the task's region for the scope's life, then is back in its own (the task
// may be freed by then: only its region is read, at the start).
class region_scope {
 public:
  region_scope(worker& w, const work_item& t) noexcept : w_(w), outer_(w.isolation) {
    w.isolation = t.isolation;
  }
  ~region_scope() { w_.isolation = outer_; }
  region_scope(const region_scope&) = delete;
  region_scope& operator=(const region_scope&) = delete;

 private:
  worker& w_;
  const region_id outer_;
};

}  // namespace spool::detail
