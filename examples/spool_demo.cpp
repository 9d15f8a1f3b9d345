// spool-demo: what `make run` shows until the server exists. tpool's experiment at a size that
// suits a small machine: N ints filled descending, sorted by a recursive quicksort whose halves
// are pool tasks (each task waits for the half it handed off, so the pool must help while
// waiting), timed against the same quicksort on one thread and against std::sort; then the
// library's spool::parallel_sort on the same pool.
//
//   spool-demo [--n COUNT] [--threads T] [--cutoff C]
#include <spool/parallel.hpp>
#include <spool/spool.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct options {
  std::size_t n = 20'000'000;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::size_t cutoff = 20'000;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* flag) -> const char* {
      if (std::strcmp(argv[i], flag) != 0) return nullptr;
      if (i + 1 >= argc) {
        std::fprintf(stderr, "spool-demo: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (const char* v = value("--n")) {
      o.n = std::strtoull(v, nullptr, 10);
    } else if (const char* v2 = value("--threads")) {
      o.threads = static_cast<unsigned>(std::strtoul(v2, nullptr, 10));
    } else if (const char* v3 = value("--cutoff")) {
      o.cutoff = std::strtoull(v3, nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: spool-demo [--n COUNT] [--threads T] [--cutoff C]\n");
      std::exit(2);
    }
  }
  if (o.n < 2 || o.threads < 1 || o.cutoff < 16) {
    std::fprintf(stderr, "spool-demo: need --n >= 2, --threads >= 1, --cutoff >= 16\n");
    std::exit(2);
  }
  return o;
}

// Median-of-three Hoare partition, as in tpool's experiment.
std::size_t partition(int* a, std::size_t n) {
  std::size_t mid = n / 2;
  if (a[mid] < a[0]) std::swap(a[mid], a[0]);
  if (a[n - 1] < a[0]) std::swap(a[n - 1], a[0]);
  if (a[n - 1] < a[mid]) std::swap(a[n - 1], a[mid]);
  const int pivot = a[mid];
  std::size_t i = 0, j = n - 1;
  for (;;) {
    while (a[i] < pivot) ++i;
    while (a[j] > pivot) --j;
    if (i >= j) return j + 1;
    std::swap(a[i++], a[j--]);
  }
}

void quicksort_serial(int* a, std::size_t n) {
  while (n > 16) {
    std::size_t k = partition(a, n);
    if (k < n - k) {
      quicksort_serial(a, k);
      a += k;
      n -= k;
    } else {
      quicksort_serial(a + k, n - k);
      n = k;
    }
  }
  std::sort(a, a + n);
}

void quicksort_pool(spool::pool& pool, int* a, std::size_t n, std::size_t cutoff) {
  if (n <= cutoff) return quicksort_serial(a, n);
  std::size_t k = partition(a, n);
  auto left = pool.submit([&pool, a, k, cutoff] { quicksort_pool(pool, a, k, cutoff); });
  quicksort_pool(pool, a + k, n - k, cutoff);
  left.get();  // on a worker this runs other tasks until the left half is done
}

std::vector<int> descending(std::size_t n) {
  std::vector<int> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<int>(n - i);
  return v;
}

template <class F>
double seconds(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  std::printf("spool-demo: recursive quicksort of %zu ints filled descending (a[i] = N - i)\n",
              o.n);

  auto v = descending(o.n);
  double t_std = seconds([&] { std::sort(v.begin(), v.end()); });
  bool ok = std::is_sorted(v.begin(), v.end());

  v = descending(o.n);
  double t_serial = seconds([&] { quicksort_serial(v.data(), v.size()); });
  ok = ok && std::is_sorted(v.begin(), v.end());

  v = descending(o.n);
  spool::pool pool{spool::config{.threads = o.threads}};
  double t_pool = seconds(
      [&] { pool.submit([&] { quicksort_pool(pool, v.data(), v.size(), o.cutoff); }).get(); });
  ok = ok && std::is_sorted(v.begin(), v.end());
  const spool::stats s = pool.statistics();

  // The library's own sort partitions the top levels in parallel too (spool/parallel.hpp).
  v = descending(o.n);
  double t_parallel_sort = seconds([&] { spool::parallel_sort(pool, v.begin(), v.end()); });
  ok = ok && std::is_sorted(v.begin(), v.end());

  std::printf("  std::sort, 1 thread        %8.3f s\n", t_std);
  std::printf("  quicksort, 1 thread        %8.3f s\n", t_serial);
  std::printf("  quicksort, spool %2u threads %8.3f s   speedup %.2fx over 1 thread\n", o.threads,
              t_pool, t_serial / t_pool);
  std::printf("  spool::parallel_sort %2u thr %8.3f s   speedup %.2fx over std::sort\n", o.threads,
              t_parallel_sort, t_std / t_parallel_sort);
  std::printf("  pool: %llu tasks, %llu stolen between workers\n",
              static_cast<unsigned long long>(s.completed),
              static_cast<unsigned long long>(s.stolen));
  std::printf("  result %s\n", ok ? "sorted" : "NOT SORTED");
  return ok ? 0 : 1;
}
