// spool/spool.hpp: the C++ API of libspool, a producer-consumer thread pool.
//
//   spool::pool pool{spool::config{.threads = 4, .queue_capacity = 1024}};
//   auto answer = pool.submit([](int x) { return x * 2; }, 21);   // spool::future<int>
//   pool.post([] { do_something(); });                            // fire and forget
//   int v = answer.get();                                          // 42
//   pool.wait_idle();
//
// Hazards, stated where you will read them:
//  - Submissions from outside the pool go through a bounded queue (config::queue_capacity)
//    and obey config::on_full. Submissions made by a task running on the pool go to that
//    worker's own deque and are never bounded, so recursive submission cannot deadlock.
//  - wait_idle(), shutdown() and the destructor block; called from one of the pool's own
//    workers they would wait for themselves, so they throw spool::error(errc::would_deadlock)
//    instead (the destructor, which cannot throw, terminates the program with a message).
//  - Waiting on a future from a worker runs other tasks meanwhile (help while waiting), so
//    the waiting task's stack can grow by the depth of what it helps with.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "spool/detail/future_state.hpp"
#include "spool/detail/task.hpp"
#include "spool/error.hpp"
#include "spool/future.hpp"

namespace spool {

// What a submission from outside the pool does when the bounded queue is full.
enum class full_policy {
  block,           // wait for room (the paper's behaviour); errc::shut_down if the pool closes
  block_for,       // wait up to config::block_timeout, then errc::timed_out
  reject,          // fail at once with errc::full
  caller_runs,     // run the task in the submitting thread
  discard_oldest,  // drop the oldest queued task (its future reports cancellation) and enqueue
};

enum class shutdown_mode {
  drain,    // refuse new work, run everything already queued, join the threads
  discard,  // refuse new work, drop everything queued (futures report cancellation), join
};

struct config {
  // Worker threads; 0 means std::thread::hardware_concurrency().
  unsigned threads = 0;
  // Bound on tasks queued from outside the pool; 0 means unbounded.
  std::size_t queue_capacity = 0;
  full_policy on_full = full_policy::block;
  // How long full_policy::block_for waits for room.
  std::chrono::nanoseconds block_timeout = std::chrono::seconds(1);
  // Prefix for the workers' thread names ("<name>-<index>", cut to 15 characters).
  std::string name = "spool";
  // Receives exceptions thrown by tasks given to post(). Empty: print to stderr. Either way the
  // task is counted in stats::failed. Runs on the worker that ran the task.
  std::function<void(std::exception_ptr)> on_exception = {};
  // Rounds an idle worker polls for work before it sleeps (each round is a few pause
  // instructions and a look at the queues). 0 sleeps at once.
  unsigned spin_rounds = 64;
};

// A snapshot of the pool's counters. Each field is read atomically, but the fields are not
// read at one instant, so under load they need not add up exactly.
struct stats {
  std::uint64_t threads_live = 0;  // worker threads that exist
  std::uint64_t threads_busy = 0;  // workers running a task now
  std::uint64_t queued = 0;        // tasks waiting in the queue and the deques
  std::uint64_t submitted = 0;     // tasks accepted
  std::uint64_t completed = 0;     // tasks that ran and returned normally
  std::uint64_t failed = 0;        // tasks that ran and threw
  std::uint64_t rejected = 0;      // submissions refused (full, timed out, shut down)
  std::uint64_t stolen = 0;        // tasks a worker took from another worker's deque
  std::uint64_t cancelled = 0;     // tasks dropped without running
};

class pool {
 public:
  explicit pool(config cfg = {});
  // Drains: runs everything queued, then joins (shutdown(shutdown_mode::drain)).
  ~pool();
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;

  // Runs f(args...) on the pool. Throws spool::error if the submission is refused.
  template <class F, class... Args>
  [[nodiscard]] auto submit(F&& f, Args&&... args)
      -> future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> {
    using result = std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>;
    auto call = bind(std::forward<F>(f), std::forward<Args>(args)...);
    auto* t = new detail::future_task<decltype(call), result>(core_, std::move(call));
    detail::state<result>* s = t;
    throw_if_error(enqueue(t));
    return future<result>(s);
  }

  // Runs f() on the pool without a future. An exception it throws goes to
  // config::on_exception. Throws spool::error if the submission is refused.
  template <class F>
  void post(F&& f) {
    throw_if_error(try_post(std::forward<F>(f)));
  }

  // As post(), but reports a refusal as an error code instead of throwing.
  template <class F>
  [[nodiscard]] std::error_code try_post(F&& f) noexcept {
    detail::task* t;
    try {
      t = new detail::post_task<std::decay_t<F>>(std::forward<F>(f));
    } catch (...) {
      return errc::no_memory;
    }
    return enqueue(t);
  }

  // Blocks until no task is queued or running. The pool stays usable.
  void wait_idle();

  // Stops accepting submissions from outside the pool and returns at once; queued tasks still
  // run. (tpool_shutdown's behaviour.) A later shutdown() or the destructor joins.
  void close() noexcept;

  // Refuses new work, then runs (drain) or drops (discard) what is queued, waits for running
  // tasks, and joins the workers. Returns how many tasks were dropped. Safe to call twice.
  std::size_t shutdown(shutdown_mode mode = shutdown_mode::drain);

  stats statistics() const noexcept;
  std::size_t thread_count() const noexcept;
  // True if the calling thread is one of this pool's workers.
  bool is_worker() const noexcept;

 private:
  template <class F, class... Args>
  static auto bind(F&& f, Args&&... args) {
    return [fn = std::forward<F>(f), ... as = std::forward<Args>(args)]() mutable -> decltype(auto) {
      return std::invoke(std::move(fn), std::move(as)...);
    };
  }
  std::error_code enqueue(detail::task* t) noexcept;
  static void throw_if_error(std::error_code ec) {
    if (ec) throw error(static_cast<errc>(ec.value()));
  }

  detail::core* core_;
};

// The calling thread's position in its pool: 0..threads-1 on a worker, -1 elsewhere.
int this_worker_index() noexcept;

}  // namespace spool
