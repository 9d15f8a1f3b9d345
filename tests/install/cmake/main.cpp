// Installed-package smoke test: find_package(spool) + spool::spool.
#include <spool/spool.hpp>

#include <cstdio>

int main() {
  spool::pool p{spool::config{.threads = 2}};
  auto f = p.submit([] { return 42; });
  const int v = f.get();
  if (v != 42) {
    std::fprintf(stderr, "consumer: expected 42, got %d\n", v);
    return 1;
  }
  std::puts("cmake consumer: OK (42)");
  return 0;
}
