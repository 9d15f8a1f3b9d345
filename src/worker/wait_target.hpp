// worker/wait_target.hpp: something a worker can wait on while it helps (core::help_until):
// a future's state, a task group, a fork's half.
//
// Boundary with sleep/: the waker (whoever makes done() true) must call
// core::wake_waiting_workers() if a worker is armed. arm() and the waker's check pair like the
// parker (each side writes, then reads the other's word, both seq_cst), so the waiter either
// sees done() or is woken (api/README.md, "Futures").
#pragma once

#include "spool/detail/work_item.hpp"

namespace spool::detail {

class wait_target {
 public:
  virtual bool done() const noexcept = 0;
  // Announces that the calling worker may sleep in the parker until done(). Returns true,
  // having announced nothing, if done() already holds.
  virtual bool arm() noexcept = 0;
  // Withdraws the announcement after the worker wakes (or decides not to sleep).
  virtual void disarm() noexcept {}
  // The task whose completion this waits for, if it is one task that may sit in a queue (a
  // future's own task): an isolated wait may run it though it is not of the wait's region.
  virtual const work_item* direct() const noexcept { return nullptr; }

 protected:
  ~wait_target() = default;
};

// A wait_target for a future's state or a fork's half (join_task): both are ready() once,
// for good, so arm() is mark_waited_by_worker() and there is nothing to withdraw.
template <class T>
class waitable final : public wait_target {
 public:
  explicit waitable(T& t) noexcept : t_(t) {}
  bool done() const noexcept override { return t_.ready(); }
  bool arm() noexcept override { return t_.mark_waited_by_worker(); }
  const work_item* direct() const noexcept override { return &t_; }

 private:
  T& t_;
};

}  // namespace spool::detail
