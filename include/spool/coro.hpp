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
//  - Where a coroutine runs: on whatever thread resumes it. After co_await schedule(pool) or a
//    suspending co_await on a future, that is a worker of the pool (the future's pool); a
//    resumption the pool refuses or drops (shutdown) happens on the thread that completed the
//    future or drops the task instead, so every suspended coroutine is resumed once.
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
//  - A task<T> may be awaited or started once (again, or an empty task:
//    spool::error(errc::invalid_argument)). Destroying a task that never ran frees its frame.
#pragma once

#include <coroutine>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "spool/detail/future_state.hpp"
#include "spool/error.hpp"
#include "spool/future.hpp"
#include "spool/spool.hpp"

namespace spool {

template <class T = void>
class task;

namespace detail {

// The trampoline behind symmetric transfer (see the header comment). Invariant: `next` is
// set only while `driving` (a drive() call is on this thread's stack, which will resume it),
// and holds at most one handle; a second hand-on while it is taken transfers directly.
struct trampoline {
  std::coroutine_handle<> next;
  bool driving = false;
};
inline thread_local trampoline tl_trampoline;

// Resumes h, then every coroutine handed on meanwhile, one after another in this frame.
inline void drive(std::coroutine_handle<> h) noexcept {
  trampoline& t = tl_trampoline;
  if (t.driving) {  // nested (a continuation run inline): the outer loop takes what h hands on
    h.resume();
    return;
  }
  t.driving = true;
  h.resume();
  while (t.next) std::exchange(t.next, nullptr).resume();
  t.driving = false;
}

// What an await_suspend returns to transfer to h: h itself (a plain symmetric transfer), or,
// under drive(), the no-op coroutine after leaving h for drive's loop.
inline std::coroutine_handle<> hand_on(std::coroutine_handle<> h) noexcept {
  trampoline& t = tl_trampoline;
  if (!t.driving || t.next) return h;
  t.next = h;
  return std::noop_coroutine();
}

// A continuation that resumes a coroutine. It lives inside the awaiter (in the suspended
// coroutine's frame), so suspending allocates nothing; run() touches nothing of its own after
// resume(), because the resumed coroutine may destroy the awaiter.
class resume_task final : public continuation_task {
 public:
  std::coroutine_handle<> handle;
  outcome run(core&) noexcept override {
    drive(handle);
    return outcome::completed;
  }
  // Dropped by a discarding shutdown: resume here all the same (see the header comment).
  void cancel() noexcept override { drive(handle); }
};

// co_await on a future (held by value, moved in) or a shared_future (a copy).
template <class F>
class future_awaiter {
 public:
  explicit future_awaiter(F f) : future_(std::move(f)) {
    if (!future_.valid()) throw error(errc::invalid_argument, "spool: co_await on an empty future");
  }
  bool await_ready() const noexcept { return future_.ready(); }
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    resume_.handle = h;
    // false: it became ready meanwhile; go on without suspending.
    return future_access<typename F::value_type>::state_of(future_).add_continuation(&resume_);
  }
  decltype(auto) await_resume() { return future_.get(); }

 private:
  F future_;
  resume_task resume_;
};

// The result slot of a task's promise.
template <class T>
class task_result {
 public:
  template <class V>
  void return_value(V&& v) {
    value_.emplace(std::forward<V>(v));
  }
  T take() {
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    return std::move(*value_);
  }

 protected:
  std::exception_ptr failure_;

 private:
  std::optional<T> value_;
};
template <class T>
class task_result<T&> {
 public:
  void return_value(T& v) noexcept { value_ = std::addressof(v); }
  T& take() {
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    return *value_;
  }

 protected:
  std::exception_ptr failure_;

 private:
  T* value_ = nullptr;
};
template <>
class task_result<void> {
 public:
  void return_void() noexcept {}
  void take() {
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

 protected:
  std::exception_ptr failure_;
};

// Coroutine frames come from the pool's recycled task memory, as tasks do: a frame is often
// allocated on one worker and freed on another.
struct frame_memory {
  static void* operator new(std::size_t size) { return task::operator new(size); }
  static void operator delete(void* p, std::size_t size) noexcept {
    task::operator delete(p, size);
  }
};

template <class T>
class task_promise : public task_result<T>, public frame_memory {
 public:
  spool::task<T> get_return_object() noexcept;
  std::suspend_always initial_suspend() noexcept { return {}; }
  // Symmetric transfer to whoever awaited the task (nothing, if nobody did).
  struct final_awaiter {
    bool await_ready() noexcept { return false; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<task_promise> h) noexcept {
      std::coroutine_handle<> next = h.promise().continuation_;
      return next ? hand_on(next) : std::noop_coroutine();
    }
    void await_resume() noexcept {}
  };
  final_awaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { this->failure_ = std::current_exception(); }

  std::coroutine_handle<> continuation_;
};

// The coroutine behind spool::start: awaits the task and completes the future's state. Its
// frame frees itself at the end. `resume` is how the pool starts it.
struct root {
  struct promise_type : frame_memory {
    root get_return_object() noexcept {
      return root{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }  // the body catches everything
    resume_task resume;
  };
  std::coroutine_handle<promise_type> handle;
};

template <class T>
root run_root(promise_state<T>* s, spool::task<T> t) {
  // The failure is published after the handler has ended, so from then on only the state
  // refers to the exception (as future_task does; see state_base::rethrow_if_failed).
  std::exception_ptr failure;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(t);
      s->set_value();
    } else {
      s->set_value(co_await std::move(t));
    }
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) s->set_exception(std::move(failure));
  s->release();
}

}  // namespace detail

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
    struct awaiter {
      std::coroutine_handle<promise_type> h;
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
        h.promise().continuation_ = awaiting;
        return detail::hand_on(h);
      }
      T await_resume() { return h.promise().take(); }
    };
    return awaiter{handle_};
  }

 private:
  friend class detail::task_promise<T>;
  template <class U>
  friend future<U> start(pool& p, task<U> t);
  explicit task(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
  std::coroutine_handle<promise_type> handle_;
};

template <class T>
spool::task<T> detail::task_promise<T>::get_return_object() noexcept {
  return spool::task<T>(std::coroutine_handle<task_promise>::from_promise(*this));
}

// Runs t as a task on p and returns the future of its result. No thread blocks while t waits
// on futures. Throws spool::error if p refuses the task (as submit() would), and
// errc::invalid_argument for an empty task or one that has run.
template <class T>
future<T> start(pool& p, task<T> t) {
  if (!t.handle_ || t.handle_.done() || t.handle_.promise().continuation_)
    throw error(errc::invalid_argument, "spool::start of an empty or used task");
  detail::core* owner = detail::core_of(p);
  auto* s = new detail::promise_state<T>(owner);  // two references: the root's and the future's
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
  if (std::error_code why = detail::submit_continuation(owner, &node)) {
    r.handle.destroy();  // never started: frees the task too
    s->release();
    throw error(static_cast<errc>(why.value()));
  }
  return result;
}

// co_await schedule(p): suspends and resumes as a task on one of p's workers. On a refusal
// (the pool shut down, or its bounded queue is full with full_policy::reject) the co_await
// throws spool::error without suspending.
inline auto schedule(pool& p) {
  class awaiter {
   public:
    explicit awaiter(detail::core* owner) noexcept : owner_(owner) {}
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) {
      resume_.handle = h;
      if (std::error_code why = detail::submit_continuation(owner_, &resume_)) {
        why_ = why;
        return false;  // resume at once; await_resume reports the refusal
      }
      return true;
    }
    void await_resume() const {
      if (why_) throw error(static_cast<errc>(why_.value()));
    }

   private:
    detail::core* owner_;
    detail::resume_task resume_;
    std::error_code why_;
  };
  return awaiter(detail::core_of(p));
}

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
