// spool/coro.hpp: C++20 coroutines on a spool::pool.
//
//   spool::task<int> fib(spool::pool& p, int n) {
//     if (n < 2) co_return n;
//     spool::future<int> left = spool::start(p, fib(p, n - 1));  // runs on the pool meanwhile
//     int right = co_await fib(p, n - 2);                         // runs here, then resumes us
//     co_return co_await std::move(left) + right;                 // suspends, blocks nothing
//   }
//   int v = spool::start(pool, fib(pool, 30)).get();
//
//   co_await spool::schedule(pool);   // go on as a task on one of the pool's workers
//
// What this header promises:
//  - spool::task<T> is lazy: calling a task coroutine creates its frame and runs nothing. It
//    runs when awaited (co_await from another coroutine: it starts on the awaiting thread, and
//    the awaiter resumes where the task finishes, by symmetric transfer, so chains and deep
//    recursion of awaits do not grow the stack; see below) or when given to
//    spool::start(pool, task), which runs it as a task on the pool and returns a
//    spool::future<T> of its result.
//  - co_await on a spool::future<T> or spool::shared_future<T> that is not ready suspends the
//    coroutine and registers a continuation on the future: when the future completes, the
//    coroutine is resumed as a task on the future's pool. No thread blocks while it waits.
//    A ready future is read at once, without suspending.
//  - Exceptions pass through co_await: a task's exception is rethrown by the co_await that
//    awaits it (or by its future's get() after start), a failed or cancelled future's by the
//    co_await on it.
//  - Where a coroutine runs: on whatever thread resumes it. After co_await schedule(pool), that
//    is a worker of `pool`. After a suspending co_await on a future, it is a worker of the
//    awaiting coroutine's pool (the pool whose worker it was running on when it suspended;
//    the future's pool if it was running outside any pool), whichever pool the future
//    belongs to. A resumption the pool refuses, drops (shutdown) or can no longer take (the
//    pool was destroyed) happens on the thread that completed the future or drops the task
//    instead. So a suspended coroutine is resumed exactly once when what it awaits completes;
//    one awaiting a future that never completes (a promise kept unset) stays suspended, and
//    its start() future never becomes ready: destroy or set the promise, or start the
//    coroutine with a stop token (below) that the pool's shutdown or its owner stops.
//    co_await schedule(pool) on a pool that refuses the task throws spool::error (errc as
//    submit() would report) from the co_await, without suspending.
//  - Symmetric transfer without relying on tail calls: compilers make a transfer a tail call
//    only when optimising (g++: sibling-call optimisation, on from -O2, and not at all under
//    AddressSanitizer), so on a thread where the pool resumes coroutines the transfer is a
//    trampoline instead (detail::drive): the suspending coroutine leaves the next one's handle
//    in a thread-local slot and returns, and the loop that resumed it resumes the next. Await
//    chains and recursion then run in constant stack at every optimisation level. Where no
//    such loop runs (a coroutine of another library resuming a spool::task), the task falls
//    back to plain symmetric transfer.
//  - Cancellation: spool::start(pool, task, stop_token) gives the coroutine (and every task it
//    awaits) a stop token. A stop requested before the coroutine starts keeps it from running;
//    afterwards, a co_await on a future (or schedule()) throws spool::task_cancelled if the
//    stop came before it, and a stop that comes while the coroutine is suspended on a future
//    cancels that future if its work has not started (the cancellation propagates up its
//    chain) and resumes the coroutine, on its pool, with task_cancelled thrown from the
//    co_await. The coroutine may catch it. Without a token (the default) nothing of this is
//    registered and an await costs what it did. pool.get_stop_token() makes the pool's
//    shutdown the stop; a task_group's get_stop_token() makes its cancel() the stop.
//  - A task<T> may be awaited or started once (again, or an empty task:
//    spool::error(errc::invalid_argument)). Destroying a task that never ran frees its frame.
#pragma once

#include <coroutine>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "spool/detail/coro_resume.hpp"
#include "spool/detail/coro_task.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/error.hpp"
#include "spool/future.hpp"
#include "spool/spool.hpp"

namespace spool {

template <class T = void>
class task;
template <class T>
future<T> start(pool& p, task<T> t, std::stop_token stop = {});

// A lazy coroutine whose result is a T (see the header comment). Move-only; co_await it (as
// an rvalue: co_await make_task() or co_await std::move(t)) from another coroutine, or run it
// with spool::start.
template <class T>
class [[nodiscard]] task {
 public:
  using promise_type = detail::task_promise<T>;
  using value_type = T;

  task() noexcept = default;
  task(task&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  task& operator=(task other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~task() {
    if (handle_) handle_.destroy();
  }

  bool valid() const noexcept { return static_cast<bool>(handle_); }

  // Starts the task on the awaiting thread; the awaiter resumes when it finishes and receives
  // its value or exception.
  auto operator co_await() && {
    if (!handle_ || handle_.promise().continuation_ || handle_.done())
      throw error(errc::invalid_argument, "spool::task awaited twice or empty");
    return detail::task_awaiter<T>{handle_};
  }

 private:
  friend class detail::task_promise<T>;
  friend struct detail::task_access;
  template <class U>
  friend future<U> start(pool& p, task<U> t, std::stop_token stop);
  explicit task(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
  std::coroutine_handle<promise_type> handle_;
};

// Runs t as a task on p and returns the future of its result. No thread blocks while t waits
// on futures. Throws spool::error if p refuses the task (as submit() would), and
// errc::invalid_argument for an empty task or one that has run.
//
// With a stop token, the coroutine can be cancelled: a stop requested before it starts keeps
// it from running (its future reports task_cancelled); once it runs, every co_await on a
// future or shared_future in it (and in the tasks it awaits) throws task_cancelled if the
// stop was requested before it, and a stop requested while it is suspended on one ends that
// wait: the awaited future is cancelled if its work has not started (so the cancellation
// propagates), and the coroutine resumes, on its pool, with task_cancelled thrown from the
// co_await. It may catch that and go on. Give it p.get_stop_token() to have p's shutdown
// cancel it, or a task_group's to cancel it with the group. future::cancel() on the result
// claims a coroutine that has not started; it does not reach a running one.
template <class T>
future<T> start(pool& p, task<T> t, std::stop_token stop) {
  if (!t.handle_ || t.handle_.done() || t.handle_.promise().continuation_)
    throw error(errc::invalid_argument, "spool::start of an empty or used task");
  const detail::pool_ref owner = detail::ref_of(p);
  // Two references: the root's and the future's.
  auto* s = new detail::root_state<T>(owner, std::move(stop));
  future<T> result = detail::future_access<T>::make(s);
  detail::root r;
  try {
    r = detail::run_root(s, std::move(t));
  } catch (...) {  // no memory for the frame
    s->release();
    throw;
  }
  detail::resume_task& node = r.handle.promise().resume;
  node.handle = r.handle;
  node.set_where(owner);
  if (std::error_code why = detail::submit_task(owner, priority::normal, &node)) {
    r.handle.destroy();  // never started: frees the task too
    s->release();
    throw error(static_cast<errc>(why.value()));
  }
  return result;
}

// co_await schedule(p): suspends and resumes as a task on one of p's workers. On a refusal
// (the pool shut down, or its bounded queue is full with full_policy::reject) the co_await
// throws spool::error without suspending; in a coroutine whose stop was requested, it throws
// task_cancelled without suspending.
inline auto schedule(pool& p) { return detail::schedule_awaiter(detail::ref_of(p)); }

// co_await on a future consumes it (leaves it empty) and yields get()'s result; on a
// shared_future it yields get()'s const reference, valid while the shared_future lives.
template <class T>
detail::future_awaiter<future<T>> operator co_await(future<T>&& f) {
  return detail::future_awaiter<future<T>>(std::move(f));
}
template <class T>
detail::future_awaiter<future<T>> operator co_await(future<T>& f) {
  return detail::future_awaiter<future<T>>(std::move(f));
}
template <class T>
detail::future_awaiter<shared_future<T>> operator co_await(const shared_future<T>& f) {
  return detail::future_awaiter<shared_future<T>>(f);
}

}  // namespace spool
