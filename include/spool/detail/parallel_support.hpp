// spool/detail/parallel_support.hpp: what the algorithms of spool/parallel.hpp share: the
// first failure of a call, fork/join of two callables on a pool, running a whole call on the
// pool's workers, and cutting an index range into chunks. Not part of the API.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spool/detail/join_task.hpp"
#include "spool/error.hpp"
#include "spool/future.hpp"
#include "spool/pool.hpp"

namespace spool {

namespace detail {

// The first exception that any part of one algorithm call threw. Once one is recorded, the
// parts not yet started are skipped.
class first_failure {
 public:
  bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }

  // Runs f() unless a failure is recorded; records what it throws.
  template <class F>
  void run(F& f) noexcept {
    if (failed()) return;
    try {
      f();
    } catch (...) {
      capture();
    }
  }

  // Records the exception being handled, if it is the first. Call inside a catch block.
  void capture() noexcept {
    if (!failed_.exchange(true, std::memory_order_relaxed)) error_ = std::current_exception();
  }

  // Call once every part has been joined: the joins order error_'s write before this read.
  void rethrow_if_failed() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

// A callable and the first_failure its exceptions go to, as a join_call and its context.
template <class F>
struct guarded_call {
  first_failure& failure;
  F& fn;
  static void call(void* self) noexcept {
    auto& g = *static_cast<guarded_call*>(self);
    g.failure.run(g.fn);
  }
};

// Runs left() here and right() as a task of p, and returns when both are done. Nothing escapes:
// their exceptions go to `failure`. If the pool refuses the task, or drops it unrun (a
// discarding shutdown), right() runs here instead: the task only referred to it. Called on a
// worker of p (run_in_pool puts every algorithm there), the task lives on this frame and
// costs no allocation (src/api/join.cpp); on any other thread, left() and right() run here.
template <class Left, class Right>
void fork_join(pool& p, first_failure& failure, Left& left, Right& right) {
  guarded_call<Left> l{failure, left};
  guarded_call<Right> r{failure, right};
  join_task child(&guarded_call<Right>::call, &r);
  if (!fork_join_here(p, child, &guarded_call<Left>::call, &l)) failure.run(right);
}

// Runs work() on the pool: here if this thread is one of its workers, else as one task that
// this thread waits for. Then rethrows the first failure.
template <class Work>
void run_in_pool(pool& p, first_failure& failure, Work& work) {
  if (p.is_worker()) {
    failure.run(work);
  } else {
    // The task must run on a worker, where the algorithm forks: a get() here must not run it
    // on this thread (an outside waiter may run its own task, spool/future.hpp).
    future<void> whole = p.submit([&failure, &work] { failure.run(work); });
    future_access<void>::keep_on_workers(whole);
    whole.get();
  }
  failure.rethrow_if_failed();
}

// [first, last) cut into chunks of `grain` indices. Offsets are computed unsigned (at least as
// wide as unsigned int), so a signed range as wide as the type's whole span does not overflow.
template <class Index>
class chunking {
 public:
  using offset = std::make_unsigned_t<std::common_type_t<Index, unsigned>>;

  chunking(const pool& p, Index first, Index last, Index grain) noexcept
      : first_(static_cast<offset>(first)), size_(static_cast<offset>(last) - first_) {
    grain_ = static_cast<offset>(grain);
    if (grain_ == 0) {  // about 8 chunks per thread: slack for stealing to even out the load
      const offset target = static_cast<offset>(8 * std::max<std::size_t>(1, p.thread_count()));
      grain_ = std::max<offset>(1, size_ / target + (size_ % target != 0));
    }
    count_ = size_ / grain_ + (size_ % grain_ != 0);
  }

  offset count() const noexcept { return count_; }
  Index lo(offset chunk) const noexcept { return static_cast<Index>(first_ + chunk * grain_); }
  Index hi(offset chunk) const noexcept {
    const offset start = chunk * grain_;
    return static_cast<Index>(first_ + start + std::min(grain_, size_ - start));
  }

 private:
  offset first_, size_, grain_ = 0, count_ = 0;
};

// leaf(c) for every chunk c in [c0, c1), halving the interval at each fork.
template <class Offset, class Leaf>
void split_chunks(pool& p, first_failure& failure, Offset c0, Offset c1, Leaf& leaf) {
  if (c1 - c0 == 1) {
    leaf(c0);
    return;
  }
  const Offset mid = c0 + (c1 - c0) / 2;
  auto left = [&] { split_chunks(p, failure, c0, mid, leaf); };
  auto right = [&] { split_chunks(p, failure, mid, c1, leaf); };
  fork_join(p, failure, left, right);
}

// out = the chunk values of [c0, c1) combined in order. Left empty if a part failed.
template <class T, class Offset, class Leaf, class Reduce>
void reduce_chunks(pool& p, first_failure& failure, Offset c0, Offset c1, Leaf& leaf,
                   Reduce& reduce, std::optional<T>& out) {
  if (c1 - c0 == 1) {
    out.emplace(leaf(c0));
    return;
  }
  const Offset mid = c0 + (c1 - c0) / 2;
  std::optional<T> left_value, right_value;
  auto left = [&] { reduce_chunks(p, failure, c0, mid, leaf, reduce, left_value); };
  auto right = [&] { reduce_chunks(p, failure, mid, c1, leaf, reduce, right_value); };
  fork_join(p, failure, left, right);
  if (left_value && right_value)
    out.emplace(std::invoke(reduce, std::move(*left_value), std::move(*right_value)));
}

// Calls fs's elements [lo, hi) (references to parallel_invoke's callables), halving the
// interval at each fork.
template <std::size_t Lo, std::size_t Hi, class Refs>
void invoke_range(pool& p, first_failure& failure, Refs& fs) {
  if constexpr (Hi - Lo == 1) {
    std::invoke(std::get<Lo>(fs));
  } else {
    constexpr std::size_t mid = Lo + (Hi - Lo) / 2;
    auto left = [&] { invoke_range<Lo, mid>(p, failure, fs); };
    auto right = [&] { invoke_range<mid, Hi>(p, failure, fs); };
    fork_join(p, failure, left, right);
  }
}

}  // namespace detail

}  // namespace spool
