#include "workload/quicksort.hpp"

namespace bench::quicksort {

void fill_descending(std::vector<int>& a) {
  const std::size_t n = a.size();
  for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<int>(n - i);
}

bool sorted_1_to_n(const std::vector<int>& a) {
  // The input is a permutation of 1..N, so sorted means a[i] == i + 1 everywhere.
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != static_cast<int>(i + 1)) return false;
  return true;
}

void sort_serial(int* a, std::size_t n) {
  // Recurse into the smaller part and loop on the larger: stack depth stays O(log n).
  while (n > 16) {
    const std::size_t k = partition(a, n);
    if (k < n - k) {
      sort_serial(a, k);
      a += k;
      n -= k;
    } else {
      sort_serial(a + k, n - k);
      n = k;
    }
  }
  for (std::size_t i = 1; i < n; ++i) {  // insertion sort for the last few
    const int v = a[i];
    std::size_t j = i;
    for (; j > 0 && a[j - 1] > v; --j) a[j] = a[j - 1];
    a[j] = v;
  }
}

}  // namespace bench::quicksort
