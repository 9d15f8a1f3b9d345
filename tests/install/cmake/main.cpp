// Installed-package smoke test: find_package(spool) + spool::spool, with every public C++
// header (the pool, task groups, parallel algorithms, coroutines) used from outside the source
// tree.
#include <spool/coro.hpp>
#include <spool/parallel.hpp>
#include <spool/spool.hpp>
#include <spool/task_group.hpp>

#include <atomic>
#include <cstdio>
#include <vector>

namespace {
spool::task<int> doubled(spool::pool& p, int x) {
  co_await spool::schedule(p);
  co_return 2 * co_await p.submit([x] { return x; }).then([](int y) { return y; });
}
}  // namespace

int main() {
  spool::pool p{spool::config{.threads = 2}};
  auto f = p.submit([] { return 42; });
  const int v = f.get();
  if (v != 42) {
    std::fprintf(stderr, "consumer: expected 42, got %d\n", v);
    return 1;
  }

  std::atomic<int> ran{0};
  spool::task_group g{p};
  for (int i = 0; i < 10; ++i) g.run([&ran] { ++ran; });
  if (g.wait() != spool::group_status::completed || ran.load() != 10) {
    std::fprintf(stderr, "consumer: task group ran %d of 10\n", ran.load());
    return 1;
  }

  std::vector<int> xs(1000);
  for (int i = 0; i < 1000; ++i) xs[static_cast<std::size_t>(i)] = 1000 - i;
  spool::parallel_sort(p, xs.begin(), xs.end());
  for (int i = 0; i < 1000; ++i) {
    if (xs[static_cast<std::size_t>(i)] != i + 1) {
      std::fputs("consumer: parallel_sort left the vector unsorted\n", stderr);
      return 1;
    }
  }
  if (spool::start(p, doubled(p, 21)).get() != 42) {
    std::fputs("consumer: the coroutine computed a wrong value\n", stderr);
    return 1;
  }
  std::puts("cmake consumer: OK (42, task group, parallel_sort, coroutine)");
  return 0;
}
