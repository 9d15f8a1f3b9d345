// spool/detail/task.hpp: the type-erased unit of work that travels through the queues.
// Internal: users never name these types.
#pragma once

#include <cstddef>
#include <exception>
#include <new>
#include <utility>

namespace spool::detail {

class core;

// How a task left the pool through run(): it returned, it threw, or it decided not to run its
// work (a task group that was cancelled before the task started).
enum class outcome : unsigned char { completed, failed, cancelled };

// A task is intrusive (it carries its own queue link), so queueing it allocates nothing.
// Exactly one of run(), cancel() or destroy() is called on every task, once; each of
// them ends the task's life.
class task {
 public:
  task* next = nullptr;  // link while in the injector; owned by whoever holds the task

  // Runs the work. Returns outcome::failed if it threw (the exception has gone to the task's
  // future or to the pool's exception handler by then).
  virtual outcome run(core& owner) noexcept = 0;
  // The task will never run: release its resources and tell whoever waits (futures report
  // errc::cancelled, C tasks call their on_cancel hook).
  virtual void cancel() noexcept = 0;
  // The submission was refused, so nobody has seen the task: free it silently.
  virtual void destroy() noexcept = 0;

  // Task memory is recycled per thread (src/task_memory.cpp): a task is typically allocated
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

}  // namespace spool::detail
