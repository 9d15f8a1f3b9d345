// spool/detail/task.hpp: the type-erased unit of work that travels through the queues.
// Internal: users never name these types.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <utility>

namespace spool::detail {

class core;

// An isolation region's number (spool::isolate); 0 is no region. 32 bits keep task small:
// see isolation_enter (src/worker/loop.cpp) for when numbers repeat.
using region_id = std::uint32_t;

// How a task left the pool through run(): it returned, it threw, or it decided not to run its
// work (a task group that was cancelled before the task started).
enum class outcome : unsigned char { completed, failed, cancelled };

// A task is intrusive (it carries its own queue link), so queueing it allocates nothing.
// Exactly one of run(), cancel() or destroy() is called on every task, once; each of
// them ends the task's life.
class task {
 public:
  task* next = nullptr;  // link while in the injector; owned by whoever holds the task
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
  task() = default;
  ~task() = default;
  task(const task&) = delete;
  task& operator=(const task&) = delete;
};

// Reports an exception thrown by a fire-and-forget task to the pool's handler.
void report_exception(core& owner, std::exception_ptr e) noexcept;

// A fire-and-forget task around a callable.
template <class F>
class post_task final : public task {
 public:
  template <class G>
  explicit post_task(G&& fn) : fn_(std::forward<G>(fn)) {}

  outcome run(core& owner) noexcept override {
    std::exception_ptr failure;
    try {
      fn_();
    } catch (...) {
      failure = std::current_exception();
    }
    delete this;
    if (failure) {
      report_exception(owner, std::move(failure));
      return outcome::failed;
    }
    return outcome::completed;
  }
  void cancel() noexcept override { delete this; }
  void destroy() noexcept override { delete this; }

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
