// spool/detail/coro_resume.hpp: how spool's coroutines suspend and resume (spool/coro.hpp):
// the trampoline behind symmetric transfer, the continuations that resume a coroutine on its
// pool (with or without a stop token), and the awaiters of futures and of schedule().
// Internal: users never name these.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <new>
#include <optional>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>

#include "spool/detail/future_access.hpp"
#include "spool/detail/future_state.hpp"
#include "spool/error.hpp"
#include "spool/priority.hpp"

namespace spool::detail {

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

// A continuation that resumes a coroutine on its pool (where()). It lives inside the awaiter
// (in the suspended coroutine's frame), so suspending allocates nothing; it touches nothing
// of its own after resuming, because the resumed coroutine may destroy the awaiter. Its
// fields fill the task's tail (the stamp goes in the 4 bytes after work_item::isolation): 40
// bytes, which keeps the frame of spool::start's root coroutine in the 128-byte class.
class resume_task final : public continuation {
 public:
  std::uint32_t stamp = 0;  // with owner: the pool to resume on
  core* owner = nullptr;
  std::coroutine_handle<> handle;

  pool_ref where() const noexcept { return {owner, stamp}; }
  void set_where(pool_ref p) noexcept {
    owner = p.owner;
    stamp = p.stamp;
  }
  void on_ready() noexcept override { dispatch(where(), priority::normal, this); }
  void run_inline() noexcept override { drive(handle); }
  outcome run(core&) noexcept override {
    drive(handle);
    return outcome::completed;
  }
  // Dropped by a discarding shutdown: resume here all the same (see the header comment).
  void cancel() noexcept override { drive(handle); }
  void destroy() noexcept override {}  // refused: dispatch resumes it here instead
};

// What a coroutine's promise knows of its stop token (spool::start with a token): the
// token, in the root coroutine's frame, or null. A task awaited by another inherits its
// awaiter's.
struct coroutine_stop {
  const std::stop_token* stop = nullptr;
};

template <class P>
const std::stop_token* stop_of(std::coroutine_handle<P> h) noexcept {
  if constexpr (std::is_base_of_v<coroutine_stop, P>) {
    return h.promise().stop;
  } else {
    return nullptr;
  }
}

// The resumption of a coroutine whose suspension a stop token may end: a heap node, because
// both the awaited state's list and the stop callback may reach it after the coroutine has
// gone on. Whichever of the two claims it first resumes the coroutine (on its pool); a stop
// first passes the cancellation on to the awaited future (state_base::request_cancel; not to
// a shared_future's state, which has other readers), and only if that cannot cancel it (its
// work is running, or it is shared) resumes the coroutine itself, marked interrupted. References:
// the state's list (until on_ready), the awaiter (until it is destroyed), the suspending call
// (until the callback is armed), and a dispatched resumption (until it has run).
class stoppable_resume final : public continuation {
 public:
  stoppable_resume(std::coroutine_handle<> h, pool_ref where, state_base& awaited,
                   bool cancel_awaited) noexcept
      : handle_(h), where_(where), awaited_(awaited), cancel_awaited_(cancel_awaited) {
    awaited_.add_ref();
  }
  stoppable_resume(const stoppable_resume&) = delete;
  stoppable_resume& operator=(const stoppable_resume&) = delete;

  // Registers the stop callback (which runs here if the token is stopped already).
  void arm(std::stop_token st) noexcept { stop_.emplace(std::move(st), on_stop{this}); }
  bool interrupted() const noexcept { return interrupted_.load(std::memory_order_acquire); }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  void on_ready() noexcept override {
    if (claim()) resume_on_pool();
    release();  // the list's reference
  }
  void run_inline() noexcept override { resume(); }
  outcome run(core&) noexcept override {
    resume();
    return outcome::completed;
  }
  void cancel() noexcept override { resume(); }  // dropped by a discarding shutdown: resume here
  void destroy() noexcept override {}            // refused: dispatch resumes it here instead

 private:
  struct on_stop {
    stoppable_resume* node;
    void operator()() const noexcept { node->stop_requested(); }
  };
  ~stoppable_resume() {
    stop_.reset();  // waits for a callback running on another thread
    awaited_.release();
  }
  bool claim() noexcept { return !claimed_.exchange(true, std::memory_order_acq_rel); }
  void resume_on_pool() noexcept {
    refs_.fetch_add(1, std::memory_order_relaxed);  // the dispatch's, dropped by resume()
    dispatch(where_, priority::normal, this);
  }
  void resume() noexcept {
    drive(handle_);
    release();
  }
  void stop_requested() noexcept {
    if (cancel_awaited_ && awaited_.request_cancel()) return;  // completes: on_ready resumes
    if (!claim()) return;                                      // resumed already
    interrupted_.store(true, std::memory_order_release);
    resume_on_pool();
  }

  std::coroutine_handle<> handle_;
  const pool_ref where_;
  state_base& awaited_;
  const bool cancel_awaited_;
  std::atomic<std::uint32_t> refs_{3};
  std::atomic<bool> claimed_{false};
  std::atomic<bool> interrupted_{false};
  std::optional<std::stop_callback<on_stop>> stop_;
};

// co_await on a future (held by value, moved in) or a shared_future (a copy). In a coroutine
// with a stop token (spool::start), a stop already requested throws task_cancelled without
// suspending, and a stop requested while suspended ends the wait (see stoppable_resume).
template <class F>
class future_awaiter {
 public:
  explicit future_awaiter(F f) : future_(std::move(f)) {
    if (!future_.valid()) throw error(errc::invalid_argument, "spool: co_await on an empty future");
  }
  future_awaiter(const future_awaiter&) = delete;
  future_awaiter& operator=(const future_awaiter&) = delete;
  ~future_awaiter() {
    if (stoppable_ != nullptr) stoppable_->release();
  }
  bool await_ready() const noexcept { return future_.ready(); }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    auto& s = future_access<typename F::value_type>::state_of(future_);
    // Resume on the awaiting coroutine's pool; a coroutine running outside any pool resumes
    // on the future's.
    pool_ref where = running_pool();
    if (where.owner == nullptr) where = s.owner();
    if (const std::stop_token* st = stop_of(h); st != nullptr && st->stop_possible()) {
      if (st->stop_requested()) {
        stopped_ = true;
        return false;
      }
      constexpr bool shared = std::is_same_v<F, spool::shared_future<typename F::value_type>>;
      if (auto* node = new (std::nothrow) stoppable_resume(h, where, s, !shared)) {
        std::stop_token token = *st;  // the frame may be gone once the node is listed
        stoppable_ = node;
        if (!s.add_continuation(node)) {  // ready meanwhile: go on without suspending
          node->release();                // the list's
          node->release();                // the suspending call's
          return false;
        }
        node->arm(std::move(token));
        node->release();  // the suspending call's
        return true;
      }
      // No memory for the node: the wait goes on without the stop.
    }
    resume_.handle = h;
    resume_.set_where(where);
    // false: it became ready meanwhile; go on without suspending.
    return s.add_continuation(&resume_);
  }
  decltype(auto) await_resume() {
    if (stopped_ || (stoppable_ != nullptr && stoppable_->interrupted())) throw task_cancelled();
    return future_.get();
  }

 private:
  F future_;
  resume_task resume_;
  stoppable_resume* stoppable_ = nullptr;
  bool stopped_ = false;
};

// co_await schedule(pool) (see schedule below).
class schedule_awaiter {
 public:
  explicit schedule_awaiter(pool_ref owner) noexcept : owner_(owner) {}
  schedule_awaiter(const schedule_awaiter&) = delete;
  schedule_awaiter& operator=(const schedule_awaiter&) = delete;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    if (const std::stop_token* st = stop_of(h); st != nullptr && st->stop_requested()) {
      why_ = errc::cancelled;
      return false;  // await_resume throws task_cancelled
    }
    resume_.handle = h;
    resume_.set_where(owner_);
    if (std::error_code why = submit_task(owner_, priority::normal, &resume_)) {
      why_ = why;
      return false;  // resume at once; await_resume reports the refusal
    }
    return true;
  }
  void await_resume() const {
    if (why_ == errc::cancelled) throw task_cancelled();
    if (why_) throw error(static_cast<errc>(why_.value()));
  }

 private:
  pool_ref owner_;
  resume_task resume_;
  std::error_code why_;
};

}  // namespace spool::detail
