// quicksort.hpp: tpool's experiment, a recursive quicksort whose halves become tasks.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace bench::quicksort {

// a[i] = N - i: the descending input of tpool's experiment.
void fill_descending(std::vector<int>& a);
// Sorted, and still the values 1..N (so nothing was lost or duplicated).
bool sorted_1_to_n(const std::vector<int>& a);

// Hoare partition around the median of a[0], a[n/2], a[n-1] (n >= 3). Returns k in [1, n-1]:
// a[0..k) <= pivot <= a[k..n). Sorting the three candidates first puts a value <= pivot at the
// front and one >= pivot at the back, so the scans need no bounds checks.
inline std::size_t partition(int* a, std::size_t n) {
  int& lo = a[0];
  int& mid = a[n / 2];
  int& hi = a[n - 1];
  if (mid < lo) std::swap(mid, lo);
  if (hi < mid) std::swap(hi, mid);
  if (mid < lo) std::swap(mid, lo);
  const int pivot = mid;
  std::ptrdiff_t i = -1, j = static_cast<std::ptrdiff_t>(n);
  for (;;) {
    do {
      ++i;
    } while (a[i] < pivot);
    do {
      --j;
    } while (a[j] > pivot);
    if (i >= j) return static_cast<std::size_t>(j) + 1;
    std::swap(a[i], a[j]);
  }
}

// The single-threaded quicksort, also what each task runs below the cutoff.
void sort_serial(int* a, std::size_t n);

// Fork/join: the left half is a task that this call waits for; the right half runs inline.
template <class Peer>
void sort_fork_join(Peer& peer, int* a, std::size_t n, std::size_t cutoff) {
  if (n <= cutoff) return sort_serial(a, n);
  const std::size_t k = partition(a, n);
  peer.fork_join([&peer, a, k, cutoff] { sort_fork_join(peer, a, k, cutoff); },
                 [&peer, a, k, n, cutoff] { sort_fork_join(peer, a + k, n - k, cutoff); });
}

// tpool's way: both halves are posted and nobody waits for them; the caller of run_and_wait
// waits for the whole tree. Runs on pools that cannot wait inside a task.
template <class Peer>
void sort_post_halves(Peer& peer, int* a, std::size_t n, std::size_t cutoff) {
  if (n <= cutoff) return sort_serial(a, n);
  const std::size_t k = partition(a, n);
  peer.post([&peer, a, k, cutoff] { sort_post_halves(peer, a, k, cutoff); });
  peer.post([&peer, a, k, n, cutoff] { sort_post_halves(peer, a + k, n - k, cutoff); });
}

}  // namespace bench::quicksort
