// spool/detail/stop.hpp: tasks that a std::stop_token can cancel before they start, and the
// callables that receive one. Internal: users call pool::submit(std::stop_token, f, ...) and
// pool::post(std::stop_token, f).
#pragma once

#include <exception>
#include <functional>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "spool/detail/future_state.hpp"
#include "spool/detail/work_item.hpp"

namespace spool::detail {

// A callable that takes a std::stop_token before its arguments receives one (std::jthread's
// rule): the token it was submitted with, or its pool's (stopped when shutdown begins).
template <class F, class... A>
inline constexpr bool takes_stop_token_v = std::is_invocable_v<F, std::stop_token, A...>;

// What a submission of F with arguments A returns: F's result, called with a token first if it
// takes one. No `type` if F cannot be called either way (the overload then drops out).
template <class F, class... A>
struct call_result {};
template <class F, class... A>
requires takes_stop_token_v<F, A...>
struct call_result<F, A...> {
  using type = std::invoke_result_t<F, std::stop_token, A...>;
};
template <class F, class... A>
requires(!takes_stop_token_v<F, A...> && std::is_invocable_v<F, A...>) struct call_result<F, A...> {
  using type = std::invoke_result_t<F, A...>;
};
template <class F, class... A>
using call_result_t = typename call_result<std::decay_t<F>, std::decay_t<A>...>::type;

// A future's task that a stop token cancels until it starts: as future_task, plus a
// std::stop_callback registered for the task's whole life. A stop request claims the task and
// completes its future with task_cancelled (state_base::request_cancel), so the callable is
// released at once and the queued task, when a worker meets it, is dropped. After the start
// the claim is taken and a stop request does nothing here (the callable sees the token, if it
// takes one). The callback is deregistered when the state is freed; a stop request running
// the callback on another thread meanwhile finishes first (std::stop_callback's destructor
// waits for it).
template <class F, class R>
class stoppable_future_task final : public state<R> {
 public:
  template <class G>
  stoppable_future_task(pool_ref owner, std::stop_token st, G&& fn)
      : state<R>(owner), name_(name_of(fn)) {
    ::new (static_cast<void*>(&fn_)) F(std::forward<G>(fn));
    this->set_flags(state_base::k_own_task | state_base::k_bound);
    // Last: a token already stopped runs the callback here, on a complete object.
    stop_.emplace(std::move(st), on_stop{this});
  }
  ~stoppable_future_task() override {}

  outcome run(core&) noexcept override { return this->run_claimed(fn_); }
  void cancel() noexcept override {
    this->drop_unrun(fn_, std::make_exception_ptr(task_cancelled()));
  }
  const char* name() const noexcept override { return name_.get(); }
  // Refused before anyone saw it: drop both references (the future is never handed out).
  void destroy() noexcept override {
    stop_.reset();
    if (this->try_claim()) fn_.~F();  // else a stop request released it already
    this->release();
    this->release();
  }

 protected:
  bool cancel_here(cancel_walk&) noexcept override { return this->cancel_unrun(fn_); }

 private:
  struct on_stop {
    stoppable_future_task* task;
    void operator()() const noexcept { task->request_cancel(); }
  };
  union {
    F fn_;
  };
  [[no_unique_address]] name_slot<F> name_;
  std::optional<std::stop_callback<on_stop>> stop_;
};

// A fire-and-forget task with a stop token: skipped (counted cancelled, callable destroyed)
// if the token is stopped when a worker takes it. fn_ is called with no arguments: a callable
// that takes the token has it bound already.
template <class F>
class stoppable_post_task final : public work_item {
 public:
  template <class G>
  stoppable_post_task(std::stop_token st, G&& fn) : st_(std::move(st)), fn_(std::forward<G>(fn)) {}

  outcome run(core& owner) noexcept override {
    if (st_.stop_requested()) {
      delete this;
      return outcome::cancelled;
    }
    return run_posted(owner, this, fn_);
  }
  void cancel() noexcept override { delete this; }
  void destroy() noexcept override { delete this; }
  const char* name() const noexcept override { return name_of(fn_); }

 private:
  std::stop_token st_;
  F fn_;
};

}  // namespace spool::detail
