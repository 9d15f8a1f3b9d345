// spool/detail/coro_task.hpp: the insides of spool::task<T> (spool/coro.hpp): its promise and
// result slot, the awaiter that starts it, and the root coroutine through which spool::start
// runs it on a pool. Internal: users never name these.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "spool/detail/coro_resume.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/detail/work_item.hpp"
#include "spool/error.hpp"

namespace spool {

template <class T>
class task;

namespace detail {

// What the library's coroutines need of a task's insides.
struct task_access {
  template <class T>
  static const std::stop_token*& stop_slot(spool::task<T>& t) noexcept {
    return t.handle_.promise().stop;
  }
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
  static void* operator new(std::size_t size) { return work_item::operator new(size); }
  static void operator delete(void* p, std::size_t size) noexcept {
    work_item::operator delete(p, size);
  }
};

template <class T>
class task_promise : public task_result<T>, public frame_memory, public coroutine_stop {
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

// co_await on a task: starts it on the awaiting thread; the awaiter resumes when it finishes
// and receives its value or exception. The awaited task shares its awaiter's stop token (a
// root sets its task's itself).
template <class T>
struct task_awaiter {
  std::coroutine_handle<task_promise<T>> h;
  bool await_ready() const noexcept { return false; }
  template <class P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> awaiting) noexcept {
    h.promise().continuation_ = awaiting;
    if constexpr (std::is_base_of_v<coroutine_stop, P>) h.promise().stop = awaiting.promise().stop;
    return hand_on(h);
  }
  T await_resume() { return h.promise().take(); }
};

// The future's state of a coroutine started with spool::start. The root claims it when it
// starts, so a cancel() that claims it first keeps the coroutine from ever running.
template <class T>
class root_state final : public unqueued_state<T> {
 public:
  root_state(pool_ref owner, std::stop_token stop) noexcept
      : unqueued_state<T>(owner), stop_(std::move(stop)) {}
  // The root is about to run the task: false if its future was cancelled first.
  bool begin() noexcept { return this->try_claim(); }
  // The coroutine's stop token (start's argument), kept here rather than in the root's frame,
  // which it would push into the next size class.
  const std::stop_token& stop() const noexcept { return stop_; }

 protected:
  bool cancel_here(cancel_walk&) noexcept override {
    if (!this->try_claim()) return false;
    this->complete_failure(std::make_exception_ptr(task_cancelled()));
    return true;
  }

 private:
  const std::stop_token stop_;
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
root run_root(root_state<T>* s, spool::task<T> t) {
  if (!s->begin()) {  // cancelled before it started: t is destroyed with this frame
    s->release();
    co_return;
  }
  if (s->stop().stop_requested()) {  // stopped before it started: it never runs
    s->complete_failure(std::make_exception_ptr(task_cancelled()));
    s->release();
    co_return;
  }
  if (s->stop().stop_possible()) task_access::stop_slot(t) = &s->stop();
  // The failure is published after the handler has ended, so from then on only the state
  // refers to the exception (as future_task does).
  std::exception_ptr failure;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(t);
      s->produce_value();
    } else {
      s->produce_value(co_await std::move(t));
    }
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    s->complete_failure(std::move(failure));
  } else {
    s->complete_value();
  }
  s->release();
}

template <class T>
spool::task<T> task_promise<T>::get_return_object() noexcept {
  return spool::task<T>(std::coroutine_handle<task_promise>::from_promise(*this));
}

}  // namespace detail
}  // namespace spool
