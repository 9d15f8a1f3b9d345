// spool-coro-pipeline: a three-stage pipeline written as coroutines on a spool::pool. Stage one
// makes batches of numbers, stage two checks each batch for primes on the pool (one coroutine per
// batch, all in flight at once), stage three awaits every batch's count with when_all and sums
// them; the result is checked against a plain loop. No thread blocks while a stage waits.
//
//   spool-coro-pipeline [--batches B] [--batch-size S]
#include <spool/coro.hpp>
#include <spool/spool.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

bool is_prime(std::uint64_t n) {
  if (n < 2) return false;
  for (std::uint64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

// Stage one: batch k holds [k * size, (k + 1) * size).
std::vector<std::uint64_t> make_batch(std::uint64_t k, std::uint64_t size) {
  std::vector<std::uint64_t> v(size);
  for (std::uint64_t i = 0; i < size; ++i) v[i] = k * size + i;
  return v;
}

// Stage two: move onto a worker, then count the primes of one batch.
spool::task<std::uint64_t> count_primes(spool::pool& pool, std::vector<std::uint64_t> batch) {
  co_await spool::schedule(pool);
  std::uint64_t count = 0;
  for (std::uint64_t n : batch) count += is_prime(n) ? 1 : 0;
  co_return count;
}

// Stage three: start every batch, then await them all without blocking a worker.
spool::task<std::uint64_t> pipeline(spool::pool& pool, std::uint64_t batches, std::uint64_t size) {
  std::vector<spool::future<std::uint64_t>> counts;
  for (std::uint64_t k = 0; k < batches; ++k)
    counts.push_back(spool::start(pool, count_primes(pool, make_batch(k, size))));
  std::vector<std::uint64_t> each = co_await spool::when_all(std::move(counts));
  std::uint64_t total = 0;
  for (std::uint64_t c : each) total += c;
  co_return total;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t batches = 64, size = 20'000;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {
      std::fprintf(stderr, "spool-coro-pipeline: %s needs a value\n", argv[i]);
      return 2;
    }
    if (std::strcmp(argv[i], "--batches") == 0) {
      batches = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--batch-size") == 0) {
      size = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: spool-coro-pipeline [--batches B] [--batch-size S]\n");
      return 2;
    }
  }
  if (batches == 0 || size == 0) {
    std::fprintf(stderr, "spool-coro-pipeline: --batches and --batch-size must be positive\n");
    return 2;
  }
  spool::pool pool;
  const std::uint64_t total = spool::start(pool, pipeline(pool, batches, size)).get();
  std::uint64_t expected = 0;
  for (std::uint64_t n = 0; n < batches * size; ++n) expected += is_prime(n) ? 1 : 0;
  std::printf("primes below %llu: %llu (%s)\n", static_cast<unsigned long long>(batches * size),
              static_cast<unsigned long long>(total), total == expected ? "checked" : "WRONG");
  return total == expected ? 0 : 1;
}
