// spool/detail/work_item.hpp: the type-erased unit of work that travels through the queues.
// Internal: users never name these types.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <utility>

#include "spool/detail/named.hpp"

namespace spool::detail {

class core;

// An isolation region's number (spool::isolate); 0 is no region. 32 bits keep task small:
// see isolation_enter (src/worker/isolation.cpp) for when numbers repeat.
using region_id = std::uint32_t;

// A pool as a future's state, a continuation or a timer knows it: its core, and the stamp of
// the core's life that the reference was made in. The pool may have been destroyed since;
// the library checks the stamp before it touches the core from a thread outside the pool
// (src/lifetime/README.md). owner null: no pool (spool::make_ready_future without one).
struct pool_ref {
  core* owner = nullptr;
  std::uint32_t stamp = 0;
};

// How a task left the pool through run(): it returned, it threw, or it decided not to run its
// work (a task group that was cancelled before the task started).
enum class outcome : unsigned char { completed, failed, cancelled };

// A task is intrusive (it carries its own queue link), so queueing it allocates nothing.
// Exactly one of run(), cancel() or destroy() is called on every task, once; each of
// them ends the task's life.
class work_item {
 public:
  work_item* next = nullptr;  // link while in the injector; owned by whoever holds the task
  // The isolation region the task was submitted in (spool::isolate), 0 for none. Set by the
  // pool when a worker submits it (the worker's current region), read when it runs. The
  // 4 bytes after it are the first of a derived class (state_base's counters).
  region_id isolation = 0;

  // Runs the work. Returns outcome::failed if it threw (the exception has gone to the task's
  // future or to the pool's exception handler by then).
  virtual outcome run(core& owner) noexcept = 0;
  // The task will never run: release its resources and tell whoever waits (futures report
  // errc::cancelled, C tasks call their on_cancel hook).
  virtual void cancel() noexcept = 0;
  // The submission was refused, so nobody has seen the task: free it silently.
  virtual void destroy() noexcept = 0;
  // The name its callable was given (spool::named), for config::on_task_start and
  // on_task_finish; null if none. Read only when those hooks are set.
  virtual const char* name() const noexcept { return nullptr; }

  // Task memory is recycled per thread (src/memory/task_memory.cpp): a task is typically allocated
  // by the submitting thread and freed by the worker that ran it, a pattern malloc serves
  // through a lock. Over-aligned tasks use the global operators.
  static void* operator new(std::size_t size);
  static void* operator new(std::size_t size, const std::nothrow_t&) noexcept;
  static void operator delete(void* p, std::size_t size) noexcept;
  static void* operator new(std::size_t size, std::align_val_t al) {
    return ::operator new(size, al);
  }
  static void operator delete(void* p, std::size_t size, std::align_val_t al) noexcept {
    ::operator delete(p, size, al);
  }

 protected:
  work_item() = default;
  ~work_item() = default;
  work_item(const work_item&) = delete;
  work_item& operator=(const work_item&) = delete;
};

// What an isolated wait may run (spool::isolate): the tasks of its region, and the one task it
// waits for directly (may be null).
struct region_match {
  region_id region;
  const work_item* direct;
  bool operator()(const work_item* t) const noexcept {
    return t->isolation == region || t == direct;
  }
};

// Where an exception reported to the pool's handler came from; the message printed to stderr
// when config::on_exception is empty names it.
enum class thrown_by : unsigned char {
  posted_task,     // post(), post_n(), post_bulk()
  timer,           // post_after(), post_at(), post_every()
  timer_refused,   // a timer that came due after close() (the error is errc::shut_down)
  unwaited_group,  // a task of a task_group destroyed without delivering it (task_group.hpp)
  group_callback,  // a task_group's on_finished callback
};

// Reports an exception to the pool's handler (config::on_exception, else stderr).
void report_exception(core& owner, const std::exception_ptr& e,
                      thrown_by source = thrown_by::posted_task) noexcept;

// The whole run() of a fire-and-forget task t around its callable fn: calls fn, frees t (fn
// with it), then reports what fn threw to the pool's handler. Always inlined: run() stays one
// sequence (GCC would call it out of line for larger callables).
template <class T, class F>
[[gnu::always_inline]] inline outcome run_posted(core& owner, T* t, F& fn) noexcept {
  std::exception_ptr failure;
  try {
    fn();
  } catch (...) {
    failure = std::current_exception();
  }
  delete t;
  if (failure) {
    report_exception(owner, failure);
    return outcome::failed;
  }
  return outcome::completed;
}

// A fire-and-forget task around a callable.
template <class F>
class post_task final : public work_item {
 public:
  // Never copied or moved (task's copy is deleted): G is always the callable.
  template <class G>
  explicit post_task(G&& fn)  // NOLINT(bugprone-forwarding-reference-overload)
      : fn_(std::forward<G>(fn)) {}

  outcome run(core& owner) noexcept override { return run_posted(owner, this, fn_); }
  void cancel() noexcept override { delete this; }
  void destroy() noexcept override { delete this; }
  const char* name() const noexcept override { return name_of(fn_); }

 private:
  F fn_;
};

// The shared part of a range submission (pool::post_n): the n calls f(0) .. f(n-1), which
// the workers take in chunks through small tasks ("tickets") that point here. Each ticket
// holds one reference and one index of its own; the scheduling is in src/api/range.cpp, whose
// header comment gives the invariants.
class range_job {
 public:
  explicit range_job(std::size_t n) noexcept : size(n) {}
  range_job(const range_job&) = delete;
  range_job& operator=(const range_job&) = delete;

  // Calls f(i) for i in [lo, hi), in order. Returns how many of the calls threw; each
  // exception has gone to the pool's handler.
  virtual std::size_t run(core& owner, std::size_t lo, std::size_t hi) noexcept = 0;
  // Frees the job and its callable. Called once, by the holder of the last reference.
  virtual void destroy() noexcept = 0;

  const std::size_t size;
  // Set by the pool before the first ticket is visible, constant after.
  core* owner = nullptr;
  std::uint32_t width = 1;  // tickets that may run at once (src/api/range.cpp)
  std::atomic<std::uint32_t> refs{1};
  // The first index no ticket has claimed yet; never above `size`.
  alignas(64) std::atomic<std::size_t> next{0};

 protected:
  ~range_job() = default;
};

template <class F>
class range_job_of final : public range_job {
 public:
  template <class G>
  range_job_of(std::size_t n, G&& fn) : range_job(n), fn_(std::forward<G>(fn)) {}

  std::size_t run(core& owner, std::size_t lo, std::size_t hi) noexcept override {
    std::size_t failed = 0;
    for (std::size_t i = lo; i < hi; ++i) {
      try {
        fn_(i);
      } catch (...) {
        ++failed;
        report_exception(owner, std::current_exception());
      }
    }
    return failed;
  }
  void destroy() noexcept override { delete this; }

 private:
  const F fn_;  // called from several workers at once, through a const reference
};

}  // namespace spool::detail
