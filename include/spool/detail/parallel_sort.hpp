// spool/detail/parallel_sort.hpp: the machinery behind spool::parallel_sort (parallel.hpp).
// Not part of the API.
//
// The design, its invariants and why it is correct.
//
//   A quicksort whose every split has the same contract: pick a pivot, swap it to the front of
//   the range r, split the rest into [lo, q) <= pivot <= [q, hi), swap the pivot to q - 1. The
//   pivot leaves the game at each split, so both sides are shorter than r and the recursion
//   ends; everything left of the pivot compares <= it and everything right >= it, so sorting
//   both sides sorts r.
//    - Above `leaf` elements (about n / (64 * threads): many leaves per thread, so stealing
//      evens out uneven splits and the last leaf leaves little idle), the two sides are a
//      fork/join pair, one side a task. Ranges of at least n / threads elements (the top
//      level or two) are split in parallel (the block split below), since until the first
//      splits are done the other threads have nothing else to do; smaller ones serially.
//    - A leaf is sorted on its thread by the same quicksort down to ranges of k_small
//      elements, which it leaves unsorted; one insertion sort pass over the leaf then finishes
//      (every element is within k_small of its place).
//    - The pivot is the median of three, or for 128 elements or more Tukey's ninther, of
//      samples spread inside the range (not at its ends). The serial split is Hoare's scan
//      without bounds checks: the pivot at the front stops the right scan, and an element
//      >= pivot swapped to the back (the largest sample, if the last element is smaller)
//      stops the left one.
//    - Why the pivot goes back to q - 1 instead of staying at the front as in libstdc++'s
//      std::sort: on a sorted range the two swaps undo each other, so sorted runs (which the
//      first split of reversed input makes) stay sorted, and every level below scans them
//      without a swap.
//    - Depth budget: a range more than 2 log2 n splits deep goes to std::sort (introsort). A
//      level of splits costs O(n), so the work is O(n log n) whatever the pivots.
//
//   Splitting a long range in parallel (block split), by up to `threads` participants:
//    - The range is cut into blocks of B elements (up to 64k: long runs for the prefetchers).
//      Left blocks are handed out from the front, right blocks from the back, through one
//      atomic word holding (left claimed, right claimed) with left + right <= blocks: no block
//      is handed out twice, and a claimed block belongs to its holder alone. The pivot sits
//      outside the range and nobody moves it, so participants share only that word and the
//      read-only pivot.
//    - A participant holds one left and one right block and runs Hoare's scans across them:
//      the left scan skips elements < pivot and stops at one >= pivot, the right scan (from
//      the block's end down) skips elements > pivot and stops at one <= pivot; the two are
//      swapped. A block whose scan reaches its end is *done*, and then
//         every element of a done left block is <= pivot (skipped: < pivot; swapped in: it had
//         stopped the right scan, so <= pivot), every element of a done right block >= pivot.
//      The participant claims a fresh block for each side it finished, both as one pair when
//      both finished; so on mirrored input (a descending array) front block k always meets
//      back block k, as Hoare's serial scan would, and the result is as ordered as his. It
//      stops when the blocks it needs are gone, holding at most one unfinished block.
//    - Fix-up, by one thread after every participant returned: swap each unfinished left block
//      with a done left block nearer the middle, so that done left blocks form a prefix of the
//      range (all <= pivot); likewise a suffix of done right blocks (all >= pivot). What lies
//      between (the unfinished blocks and the unclaimed middle, fewer than (threads + 2) * B
//      elements) is split by the serial scan at q. Prefix <= pivot, middle split at q, suffix
//      >= pivot: the whole range is split at q.
//   Exceptions: the splits only ever swap elements; the insertion sort holds one element aside
//   while it shifts others, so a comparator that throws there leaves the range as std::sort
//   would: valid, in an unspecified order, possibly with an element moved-from.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "spool/detail/parallel_support.hpp"
#include "spool/pool.hpp"

namespace spool {

namespace detail {

// A pivot and a second element that compares >= it (a sentinel for the unguarded scan).
template <class It>
struct pivot_choice {
  It pivot;
  It upper;
};

// The median of *a, *b, *c, and the largest of them as `upper`. Moves no element.
template <class It, class Comp>
pivot_choice<It> median_of_3(It a, It b, It c, Comp& comp) {
  if (comp(*b, *a)) std::swap(a, b);
  if (comp(*c, *b)) {
    std::swap(b, c);
    if (comp(*b, *a)) std::swap(a, b);
  }
  return {b, c};
}

// The median of the elements at n/4, n/2 and 3n/4 of [first, first + n), n >= 16, or for
// n >= 128 Tukey's ninther (the median of the medians of three triples) over the elements at
// n/10, 2n/10, ..., 9n/10. On sorted or reversed input either is the exact median. The ends are
// left out on purpose: a split leaves its range's largest element at the front of the range
// below (see sort_job::split), and a sample of it would make a poor median of three.
template <class It, class Comp>
pivot_choice<It> choose_pivot(It first, std::iter_difference_t<It> n, Comp& comp) {
  if (n < 128) return median_of_3(first + n / 4, first + n / 2, first + 3 * n / 4, comp);
  const auto at = [first, n](int tenths) { return first + tenths * n / 10; };
  const It a = median_of_3(at(1), at(2), at(3), comp).pivot;
  const It b = median_of_3(at(4), at(5), at(6), comp).pivot;
  const It c = median_of_3(at(7), at(8), at(9), comp).pivot;
  return median_of_3(a, b, c, comp);
}

// Hoare's scans over [lo, hi) with the pivot outside it. Returns q: [lo, q) <= pivot <= [q, hi).
// Invariant: [lo, i) <= pivot, [j, hi) >= pivot, i <= j.
template <class It, class Comp>
It split_serial(It lo, It hi, It pivot, Comp& comp) {
  It i = lo, j = hi;
  for (;;) {
    while (i < j && comp(*i, *pivot)) ++i;
    while (i < j && comp(*pivot, *(j - 1))) --j;
    // Here i == j, or *i >= pivot >= *(j - 1); if they are one element, it equals the pivot and
    // may stay on the right.
    if (j - i <= 1) return i;
    std::iter_swap(i, j - 1);
    ++i;
    --j;
  }
}

// As split_serial, without bounds checks in the scans: requires *(hi - 1) >= *pivot, and the
// pivot just before lo (at lo - 1). The left scan stops at hi - 1 at the latest, the right scan
// at the pivot; after a swap, the swapped elements stop the next scans.
// Invariant: [lo, i) <= pivot, (j, hi) >= pivot.
template <class It, class Comp>
It split_unguarded(It lo, It hi, It pivot, Comp& comp) {
  It i = lo, j = hi;
  for (;;) {
    while (comp(*i, *pivot)) ++i;
    do {
      --j;
    } while (comp(*pivot, *j));
    // j >= i - 1; if j == i, *i is both >= and <= pivot: equal, and may stay on the right.
    if (!(i < j)) return i;
    std::iter_swap(i, j);
    ++i;
  }
}

// Splits [lo, hi) around *pivot (outside the range) with several participants: the block split
// described at the top of this file.
template <class It, class Comp>
class block_split {
 public:
  using diff = std::iter_difference_t<It>;

  block_split(It lo, It hi, It pivot, Comp& comp, first_failure& failure, unsigned width)
      : lo_(lo), n_(hi - lo), pivot_(pivot), comp_(comp), failure_(failure) {
    // Blocks of up to 64k elements (long runs for the prefetchers: each participant streams
    // through two places at once), at least 64 of them per participant, and fewer than 2^31
    // blocks so that each half of the claim word has room.
    block_ = std::clamp<diff>(n_ / (64 * static_cast<diff>(width)), 64, diff{1} << 16);
    block_ = std::max<diff>(block_, n_ / (diff{1} << 30) + 1);
    blocks_ = static_cast<std::uint64_t>(n_ / block_);
    width_ = static_cast<unsigned>(std::clamp<std::uint64_t>(blocks_ / 4, 1, width));
    held_.resize(width_);
  }

  // Returns q: [lo, q) <= pivot <= [q, hi). If a participant failed, returns nothing useful
  // (the range is then only a permutation of its input) and the failure is recorded.
  It run(pool& p) {
    std::vector<future<void>> helpers;
    helpers.reserve(width_ - 1);  // before any submission: push_back below cannot throw
    for (unsigned s = 1; s < width_; ++s) {
      try {
        helpers.push_back(p.submit([this, s] {
          auto part = [this, s] { participate(s); };
          failure_.run(part);
        }));
      } catch (...) {
        break;  // refused: fewer participants; the claims share the blocks out among the rest
      }
    }
    auto part = [this] { participate(0); };
    failure_.run(part);
    for (future<void>& h : helpers) {
      try {
        h.get();
      } catch (...) {
        // Dropped unrun (task_cancelled): it claimed nothing, the others took every block.
      }
    }
    if (failure_.failed()) return lo_ + n_;
    return fix_up();
  }

 private:
  // The block a participant still held when it stopped.
  struct unfinished {
    bool any = false;
    bool right = false;
    diff index = 0;
  };

  static constexpr std::uint64_t k_left_mask = 0xffffffffu;
  static constexpr int k_right_shift = 32;

  diff left_start(diff k) const noexcept { return k * block_; }
  diff right_start(diff k) const noexcept { return n_ - (k + 1) * block_; }

  // Claims a fresh left block if want_left and a fresh right one if want_right, both or none.
  bool claim(bool want_left, bool want_right, diff& left, diff& right) noexcept {
    const std::uint64_t need = std::uint64_t{want_left} + std::uint64_t{want_right};
    const std::uint64_t add =
        std::uint64_t{want_left} + (std::uint64_t{want_right} << k_right_shift);
    // Relaxed: a block's contents were written before the participants started (or by no one
    // since); the claim only has to hand each block to one holder.
    std::uint64_t c = claims_.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t taken_left = c & k_left_mask, taken_right = c >> k_right_shift;
      if (blocks_ - taken_left - taken_right < need) return false;
      if (claims_.compare_exchange_weak(c, c + add, std::memory_order_relaxed)) {
        if (want_left) left = static_cast<diff>(taken_left);
        if (want_right) right = static_cast<diff>(taken_right);
        return true;
      }
    }
  }

  // Hoare's scans across a left block [i, i_end) and a right block [j_begin, j), the right one
  // scanned downwards, until one of them reaches its end.
  void scan(diff& i, const diff i_end, const diff j_begin, diff& j) {
    const auto& pivot = *pivot_;
    It l = lo_ + i, r = lo_ + j;
    const It l_end = lo_ + i_end, r_begin = lo_ + j_begin;
    for (;;) {
      while (l != l_end && comp_(*l, pivot)) ++l;
      if (l == l_end) break;
      while (r != r_begin && comp_(pivot, *(r - 1))) --r;
      if (r == r_begin) break;
      --r;
      std::iter_swap(l, r);
      ++l;
    }
    i = l - lo_;
    j = r - lo_;
  }

  void participate(unsigned slot) {
    diff left = 0, right = 0;  // the held blocks' indices
    diff i = 0, i_end = 0;     // left block: [i, i_end) still to scan
    diff j_begin = 0, j = 0;   // right block: [j_begin, j) still to scan
    bool have_left = false, have_right = false;
    while (!failure_.failed() && claim(!have_left, !have_right, left, right)) {
      if (!have_left) {
        i = left_start(left);
        i_end = i + block_;
        have_left = true;
      }
      if (!have_right) {
        j_begin = right_start(right);
        j = j_begin + block_;
        have_right = true;
      }
      scan(i, i_end, j_begin, j);
      if (i == i_end) have_left = false;
      if (j == j_begin) have_right = false;
    }
    // At most one block is still held: scan() ends only once one side is done.
    if (have_left) held_[slot] = {true, false, left};
    if (have_right) held_[slot] = {true, true, right};
  }

  // Swaps the unfinished blocks of one side (indices `open`, among the `taken` claimed) with
  // done ones of that side nearer the middle; returns how many done blocks now lead that side.
  template <class Start>
  diff gather(std::vector<diff>& open, diff taken, Start start) {
    std::sort(open.begin(), open.end());
    const diff done = taken - static_cast<diff>(open.size());
    diff d = taken;
    for (diff k : open) {
      if (k >= done) break;  // already among the last, next to the middle
      do {
        --d;
      } while (std::binary_search(open.begin(), open.end(), d));
      std::swap_ranges(lo_ + start(k), lo_ + start(k) + block_, lo_ + start(d));
    }
    return done;
  }

  It fix_up() {
    const std::uint64_t c = claims_.load(std::memory_order_relaxed);
    std::vector<diff> open_left, open_right;
    for (const unfinished& u : held_)
      if (u.any) (u.right ? open_right : open_left).push_back(u.index);
    const diff done_left = gather(open_left, static_cast<diff>(c & k_left_mask),
                                  [this](diff k) { return left_start(k); });
    const diff done_right = gather(open_right, static_cast<diff>(c >> k_right_shift),
                                   [this](diff k) { return right_start(k); });
    return split_serial(lo_ + done_left * block_, lo_ + (n_ - done_right * block_), pivot_, comp_);
  }

  It lo_;
  diff n_;
  It pivot_;
  Comp& comp_;
  first_failure& failure_;
  diff block_ = 0;
  std::uint64_t blocks_ = 0;
  unsigned width_ = 1;
  std::atomic<std::uint64_t> claims_{0};  // left claimed | right claimed << 32
  std::vector<unfinished> held_;          // one slot per participant, written by it alone
};

// One parallel_sort call: the recursion described at the top of this file.
template <class It, class Comp>
class sort_job {
 public:
  using diff = std::iter_difference_t<It>;

  sort_job(pool& p, Comp& comp, first_failure& failure, diff n)
      : pool_(p), comp_(comp), failure_(failure) {
    threads_ = static_cast<unsigned>(std::max<std::size_t>(1, p.thread_count()));
    const auto t = static_cast<diff>(threads_);
    // About 64 leaves per thread: the last leaf to finish leaves the other threads idle, so
    // leaves are kept short.
    leaf_ = threads_ == 1 ? n : std::max<diff>(k_min_leaf, n / (64 * t));
    // Split in parallel only ranges of at least a thread's share: below that, the other
    // threads have ranges of their own and the fix-up would be a cost with no return.
    parallel_min_ = std::max<diff>(k_min_parallel, n / t);
  }

  // Sorts [first, last) with tasks above the leaf size.
  void sort(It first, It last, int depth) {
    if (failure_.failed()) return;
    if (last - first <= leaf_ || depth == 0) return sort_serial(first, last, depth);
    const It mid = split(first, last);
    if (failure_.failed()) return;
    auto left = [&] { sort(first, mid, depth - 1); };
    auto right = [&] { sort(mid + 1, last, depth - 1); };
    fork_join(pool_, failure_, left, right);
  }

 private:
  // The same quicksort on this thread, then one insertion sort pass over the range.
  void sort_serial(It first, It last, int depth) {
    quicksort(first, last, depth);
    insertion_sort(first, last);
  }

  // Leaves ranges of at most k_small elements unsorted (every element is then within k_small
  // of its place, which the insertion sort pass fixes in one sweep instead of one call per
  // small range). Recurses into the shorter side and loops on the longer, so the stack stays
  // O(log n); a range that runs out of depth goes to std::sort (introsort, O(n log n)).
  void quicksort(It first, It last, int depth) {
    while (last - first > k_small) {
      if (depth-- == 0) {
        std::sort(first, last, comp_);
        return;
      }
      const It mid = split(first, last);
      if (mid - first < last - mid) {
        quicksort(first, mid, depth);
        first = mid + 1;
      } else {
        quicksort(mid + 1, last, depth);
        last = mid;
      }
    }
  }

  void insertion_sort(It first, It last) {
    if (last - first < 2) return;
    for (It i = first + 1; i != last; ++i) {
      if (!comp_(*i, *(i - 1))) continue;
      auto v = std::move(*i);
      It j = i;
      do {
        *j = std::move(*(j - 1));
        --j;
      } while (j != first && comp_(v, *(j - 1)));
      *j = std::move(v);
    }
  }

  // Splits [first, last) around a pivot and returns where the pivot ends: [first, mid) <=
  // *mid <= (mid, last). The pivot waits at *first, outside the range being split, and goes
  // back to the split point after; on sorted input the two swaps undo each other, so sorted
  // runs (which the split of reversed input makes) stay sorted for the levels below.
  It split(It first, It last) {
    const diff n = last - first;
    auto [pivot, upper] = choose_pivot(first, n, comp_);
    if (pivot != first) {
      std::iter_swap(first, pivot);
      if (upper == first) upper = pivot;  // it moved there
    }
    It q;
    if (threads_ > 1 && n >= parallel_min_) {
      block_split<It, Comp> split(first + 1, last, first, comp_, failure_, threads_);
      q = split.run(pool_);
      if (failure_.failed()) return first;
    } else {
      // A sentinel >= pivot at the end lets the scans go without bounds checks.
      if (comp_(*(last - 1), *first)) std::iter_swap(last - 1, upper);
      q = split_unguarded(first + 1, last, first, comp_);
    }
    const It mid = q - 1;  // [first + 1, q) <= pivot: the pivot goes to its end
    if (mid != first) std::iter_swap(first, mid);
    return mid;
  }

  // Ranges this short are left to the insertion sort pass. Arithmetic elements compare and
  // move in a cycle, so for them a partition pass costs more than the longer insertions it
  // saves; for other types each comparison may be costly, and 16 keeps their count near
  // n log2 n.
  static constexpr diff k_small = std::is_arithmetic_v<std::iter_value_t<It>> ? 48 : 16;
  static constexpr diff k_min_leaf = 2048;
  static constexpr diff k_min_parallel = diff{1} << 14;

  pool& pool_;
  Comp& comp_;
  first_failure& failure_;
  unsigned threads_ = 1;
  diff leaf_ = 0;
  diff parallel_min_ = 0;
};

}  // namespace detail

}  // namespace spool
