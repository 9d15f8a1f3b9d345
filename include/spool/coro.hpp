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

#include "spool/detail/future_state.hpp"
#include "spool/error.hpp"
#include "spool/future.hpp"
#include "spool/spool.hpp"

namespace spool {

template <class T = void>
class task;
template <class T>
future<T> start(pool& p, task<T> t, std::stop_token stop = {});

namespace detail {

// What the library's coroutines need of a task's insides.
struct task_access {
  template <class T>
  static const std::stop_token*& stop_slot(spool::task<T>& t) noexcept {
    return t.handle_.promise().stop;
  }
};

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
// fields fill the task's tail (the stamp goes in the 4 bytes after task::isolation): 40
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

template <class T>
spool::task<T> detail::task_promise<T>::get_return_object() noexcept {
  return spool::task<T>(std::coroutine_handle<task_promise>::from_promise(*this));
}

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
