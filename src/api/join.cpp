// api/join.cpp: fork/join with the forked half on the forking worker's stack (join_task), the
// primitive under spool::parallel_invoke and the algorithms of spool/parallel.hpp.
//
// The fork: the worker counts the half as submitted and pushes it onto its own deque, as
// submit() from a worker does, then runs the left half itself. The join: it takes the half back
// from the bottom of its deque and runs it in place, unless a thief took it; then it helps
// (help_until) until the half is done. Against submit() and future::get(), this saves the
// task's allocation and free, the future state's reference counts and the search through
// find_task when nobody stole the half, which is most forks of a balanced recursion.
//
// Invariants, and why they hold:
//  - The half outlives every use. It lives in the forking frame, and fork_join returns only
//    when no other thread can touch it: it was refused (never queued); or the worker popped it
//    back (a pop that returns it means no thief's steal did: the deque hands each entry out
//    once); or ready() holds, which finish() makes true with one exchange after which the
//    finishing thread reads nothing of the half (it copies owner_ to a local first). A thief
//    whose steal lost a race may have read the pointer, but a lost steal never follows it.
//  - It is counted like any task: submitted before it is visible, finished through execute()
//    or drop() (or, popped back, by the same count here), so wait_idle() and shutdown() wait
//    for it, and statistics() counts forks as tasks.
//  - Tasks that left() pushed lie above the half in the deque; the pop-back loop runs them
//    first, as the worker loop would. It never meets a task older than the half: thieves take
//    from the oldest end, so once the half is stolen everything below it is gone too. The half
//    may also be gone before left() returns: a wait inside left() helps, and its search pops
//    the half and runs it. So the loop checks ready() before each pop; once the half is gone it
//    stops, or helps until the thief finishes.
//  - No lost wake-up: a worker that will sleep waiting for the half sets k_waited with a
//    seq_cst read-modify-write and then reads the outcome bits (mark_waited_by_worker());
//    finish() sets them with a seq_cst exchange and then reads k_waited from the old value.
//    One of the two sees the other (as for futures, api/README.md "Futures").
//  - Dropped, not lost: a discarding shutdown may cancel the half in the deque (queues::drain)
//    or when a worker takes it (execute()). Then k_dropped is set and fork_join returns false;
//    the caller runs the call itself (parallel.hpp promises that an algorithm that started
//    finishes).
#include "core.hpp"

namespace spool::detail {

outcome join_task::run(core&) noexcept {
  call_(context_);
  finish(k_ran);
  return outcome::completed;
}

void join_task::cancel() noexcept { finish(k_dropped); }

void join_task::finish(std::uint32_t how) noexcept {
  core* owner = owner_;  // after the exchange the forking frame may be gone
  const std::uint32_t old = state_.exchange(how, std::memory_order_seq_cst);
  if ((old & k_waited) != 0) owner->wake_waiting_workers();
}

bool core::fork_join(join_task& right, join_call left, void* left_context) noexcept {
  worker* w = own_worker();
  if (w == nullptr) {
    left(left_context);
    return false;
  }
  right.owner_ = this;
  idle_.tally(w, &counters::submitted, 1);
  std::error_code refused;
  if (discarding()) {
    refused = errc::shut_down;
  } else {
    stamp_region(right, *w);
    try {
      w->push_local(&right);
    } catch (...) {
      refused = errc::no_memory;  // the deque could not grow
    }
  }
  if (refused) {
    (void)refuse(w, &right, refused);
    left(left_context);
    return false;
  }
  sleep_.notify_worker();
  left(left_context);
  while (!right.ready()) {
    work_item* t = w->pop_local();
    if (t == nullptr) {
      waitable<join_task> target(right);
      help_until(target, nullptr);
      break;
    }
    if (t != &right) {
      if (w->isolation != 0 && t->isolation != w->isolation) {  // worker/isolation.hpp
        // Pushed by left() from a nested isolation region: not this region's to run while it
        // waits. Back in place (the deque holds no more than before the pop, so the push
        // cannot grow it), and the isolated wait passes over it.
        w->push_local(t);
        sleep_.notify_worker();
        waitable<join_task> target(right);
        help_until(target, nullptr);
        break;
      }
      execute(w, t);  // pushed by left(), above the half
      continue;
    }
    // Popped back: no other thread took it, and none will, so no exchange or wake-up is
    // needed; the call runs here as execute() would run it.
    if (discarding()) {
      drop(w, t);
      return false;
    }
    quiescence::task_begins(*w);
    right.call_(right.context_);
    quiescence::task_ends(*w);
    idle_.tally(w, &counters::completed, 1);
    return true;
  }
  return right.ran();
}

bool fork_join_here(pool& p, join_task& right, join_call left, void* left_context) noexcept {
  return pool_access::of(p).fork_join(right, left, left_context);
}

}  // namespace spool::detail
