// spool/parallel.hpp: parallel_invoke, parallel_for, parallel_reduce and parallel_sort on a
// spool::pool.
//
//   spool::parallel_invoke(pool, [&] { left = count(a); }, [&] { right = count(b); });
//   spool::parallel_for(pool, std::size_t{0}, v.size(), [&](std::size_t i) { v[i] *= 2; });
//   spool::parallel_for_chunks(pool, 0, n, 4096, [&](int lo, int hi) { fill(lo, hi); });
//   long sum = spool::parallel_reduce(pool, std::size_t{0}, v.size(), 0, 0L,
//                                     [&](std::size_t i) { return long{v[i]}; }, std::plus<>{});
//   spool::parallel_sort(pool, v.begin(), v.end());
//
// What every algorithm here promises, stated where you will read it:
//  - Where the work runs. Called from one of the pool's own workers (inside a task: nested use),
//    the calling worker takes part and waits by helping, so nesting cannot deadlock, even on a
//    one-thread pool. Called from any other thread, the call submits one task that does the
//    whole job and blocks until it is done: only the pool's threads do the work (a thread
//    outside the pool cannot help while it waits, so giving it a share would leave it blocked
//    in the joins).
//  - Errors. The first exception thrown by your callables (f, body, map, reduce, the
//    comparator, the elements' moves) is rethrown by the call, after every task the call
//    started has finished; work not yet started is skipped. If the pool refuses the call's
//    first task (from outside: closed, or full with full_policy::reject), the call throws
//    spool::error like submit(); if it drops it unrun, spool::task_cancelled. A task the pool
//    refuses or drops after that (shutdown(discard) while the call runs) is run by the thread
//    that would have waited for it, so an algorithm that started finishes.
//  - Concurrency. Your callables are shared, not copied per thread: they are called
//    concurrently from several threads and must allow that.
//  - Chunks (parallel_for, parallel_reduce). [first, last) is cut into chunks of `grain`
//    indices, [first + k*grain, min(first + (k+1)*grain, last)); each chunk runs on one thread,
//    indices in increasing order. grain 0 (or left out) chooses about 8 chunks per pool thread.
//    last <= first is an empty range: nothing is called.
//  - parallel_reduce combines chunk values with `reduce` along a binary tree fixed by the
//    number of chunks, always as reduce(left part, right part): it never swaps operands. So
//    the result equals the sequential fold identity ⊕ x[first] ⊕ ... ⊕ x[last-1] for any
//    associative reduce with that identity, commutative or not (string concatenation,
//    matrix products). For a non-associative one (floating-point +) the result depends on the
//    chunk boundaries only: the same grain and range give the same bits whatever the thread
//    timing; with grain 0 the boundaries follow the pool's thread_count().
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <functional>
#include <iterator>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spool/detail/parallel_sort.hpp"
#include "spool/detail/parallel_support.hpp"
#include "spool/spool.hpp"

namespace spool {

// Calls each of fs() once, in parallel, and returns when all have returned: fork/join for a
// fixed set of calls (two or more; each is called as an lvalue, neither copied nor moved, and
// its result, if any, is discarded). The calling worker runs the first itself and offers the
// others to the pool, without allocating (src/api/join.cpp); each it takes back unstolen runs on
// it too. From any other thread the whole call is one task that this thread waits for. The
// first exception rethrows after every started call returned (see the notes at the top).
template <class... Fs>
requires(sizeof...(Fs) >= 2 && (std::invocable<Fs&> && ...)) void parallel_invoke(pool& p,
                                                                                  Fs&&... fs) {
  auto refs = std::forward_as_tuple(fs...);
  detail::first_failure failure;
  auto all = [&] { detail::invoke_range<0, sizeof...(Fs)>(p, failure, refs); };
  detail::run_in_pool(p, failure, all);
}

// body(lo, hi) for consecutive chunks [lo, hi) of at most `grain` indices covering
// [first, last), in parallel. grain 0: chosen from the pool's thread_count().
template <std::integral Index, class Body>
void parallel_for_chunks(pool& p, Index first, Index last, std::type_identity_t<Index> grain,
                         Body body) {
  if (!(first < last)) return;
  const detail::chunking<Index> chunks(p, first, last, grain);
  using offset = typename detail::chunking<Index>::offset;
  detail::first_failure failure;
  auto leaf = [&](offset c) { body(chunks.lo(c), chunks.hi(c)); };
  auto all = [&] { detail::split_chunks(p, failure, offset{0}, chunks.count(), leaf); };
  detail::run_in_pool(p, failure, all);
}

template <std::integral Index, class Body>
void parallel_for_chunks(pool& p, Index first, Index last, Body body) {
  parallel_for_chunks(p, first, last, 0, std::move(body));
}

// f(i) for every i in [first, last), in parallel; each chunk of at most `grain` indices runs in
// increasing order on one thread. grain 0: chosen from the pool's thread_count().
template <std::integral Index, class F>
void parallel_for(pool& p, Index first, Index last, std::type_identity_t<Index> grain, F f) {
  parallel_for_chunks(p, first, last, grain, [&f](Index lo, Index hi) {
    for (Index i = lo; i != hi; ++i) f(i);
  });
}

template <std::integral Index, class F>
void parallel_for(pool& p, Index first, Index last, F f) {
  parallel_for(p, first, last, 0, std::move(f));
}

// Combines body(lo, hi), the value of each chunk [lo, hi) (convertible to T), with
// reduce(T, T) -> T, in order (see the notes at the top). Returns identity for an empty range.
template <std::integral Index, class T, class Body, class Reduce>
T parallel_reduce_chunks(pool& p, Index first, Index last, std::type_identity_t<Index> grain,
                         T identity, Body body, Reduce reduce) {
  if (!(first < last)) return identity;
  const detail::chunking<Index> chunks(p, first, last, grain);
  using offset = typename detail::chunking<Index>::offset;
  detail::first_failure failure;
  std::optional<T> result;
  auto leaf = [&](offset c) -> T { return body(chunks.lo(c), chunks.hi(c)); };
  auto all = [&] {
    detail::reduce_chunks(p, failure, offset{0}, chunks.count(), leaf, reduce, result);
  };
  detail::run_in_pool(p, failure, all);
  return std::move(*result);  // no failure: every chunk produced a value
}

template <std::integral Index, class T, class Body, class Reduce>
T parallel_reduce_chunks(pool& p, Index first, Index last, T identity, Body body, Reduce reduce) {
  return parallel_reduce_chunks(p, first, last, 0, std::move(identity), std::move(body),
                                std::move(reduce));
}

// identity ⊕ map(first) ⊕ ... ⊕ map(last - 1), where a ⊕ b is reduce(a, b): each chunk folds
// its indices in order starting from a copy of identity, and the chunk values are combined in
// order. reduce must take (T, map's result) and (T, T).
template <std::integral Index, class T, class Map, class Reduce>
T parallel_reduce(pool& p, Index first, Index last, std::type_identity_t<Index> grain, T identity,
                  Map map, Reduce reduce) {
  const T& id = identity;
  auto fold = [&id, &map, &reduce](Index lo, Index hi) {
    T acc = id;
    for (Index i = lo; i != hi; ++i) acc = std::invoke(reduce, std::move(acc), std::invoke(map, i));
    return acc;
  };
  return parallel_reduce_chunks(p, first, last, grain, identity, fold, std::ref(reduce));
}

template <std::integral Index, class T, class Map, class Reduce>
T parallel_reduce(pool& p, Index first, Index last, T identity, Map map, Reduce reduce) {
  return parallel_reduce(p, first, last, 0, std::move(identity), std::move(map), std::move(reduce));
}

// Sorts [first, last) by comp into the order std::sort gives (not stable: equivalent elements
// may come in any order): a quicksort whose top levels split their ranges in parallel and whose
// lower levels are tasks down to leaves sorted serially (the design is in
// spool/detail/parallel_sort.hpp). O(n log n) comparisons in the worst case. comp is called
// concurrently from several threads. If comp (or an element's move) throws, the first
// exception propagates once every task has finished, and the range is valid but unspecified,
// as std::sort leaves it. On a one-thread pool the whole range is one leaf, sorted on the
// worker.
template <std::random_access_iterator RandomIt, class Compare = std::less<>>
void parallel_sort(pool& p, RandomIt first, RandomIt last, Compare comp = {}) {
  const auto n = last - first;
  if (n < 2) return;
  detail::first_failure failure;
  detail::sort_job<RandomIt, Compare> job(p, comp, failure, n);
  const auto width = std::bit_width(static_cast<std::make_unsigned_t<decltype(n)>>(n));
  const int depth = 2 * static_cast<int>(width);  // 2 log2 n, as introsort
  auto all = [&] { job.sort(first, last, depth); };
  detail::run_in_pool(p, failure, all);
}

}  // namespace spool
