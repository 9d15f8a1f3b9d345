// spool-periodic-job: a periodic job on a pool. Every --period ms a "sampler" task records a
// reading (here: how many work items are still queued); work items arrive as delayed tasks
// spread over the run; a one-shot timer stops the sampler after --duration ms; a report is
// submitted with submit_after and awaited. Shows post_every, post_after, submit_after,
// timer::cancel and future::cancel on one pool.
//
//   spool-periodic-job [--period MS] [--duration MS] [--items N]
#include <spool/spool.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

struct options {
  long period_ms = 10;
  long duration_ms = 200;
  long items = 100;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const long v = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--period") == 0) {
      o.period_ms = v;
    } else if (std::strcmp(argv[i], "--duration") == 0) {
      o.duration_ms = v;
    } else if (std::strcmp(argv[i], "--items") == 0) {
      o.items = v;
    } else {
      std::fprintf(stderr, "usage: %s [--period MS] [--duration MS] [--items N]\n", argv[0]);
      std::exit(2);
    }
  }
  if (o.period_ms <= 0 || o.duration_ms <= 0 || o.items < 0) {
    std::fprintf(stderr, "%s: --period and --duration must be > 0, --items >= 0\n", argv[0]);
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  using std::chrono::milliseconds;
  const options o = parse(argc, argv);
  spool::pool pool{spool::config{.threads = 2, .name = "periodic"}};

  std::atomic<long> pending{o.items};
  std::mutex mu;
  std::vector<long> samples;

  // The sampler: runs every period until cancelled; runs never overlap.
  spool::timer sampler = pool.post_every(milliseconds(o.period_ms), [&] {
    std::lock_guard lock(mu);
    samples.push_back(pending.load());
  });

  // Work items, each due at its own time within the run.
  for (long i = 0; i < o.items; ++i) {
    (void)pool.post_after(milliseconds(o.duration_ms * i / (o.items + 1)),
                          [&] { pending.fetch_sub(1); });
  }

  // A job submitted and then withdrawn before its deadline: it never runs.
  auto withdrawn = pool.submit_after(milliseconds(o.duration_ms * 10), [] { return 0; });
  const bool withdrew = withdrawn.cancel();

  // Stop the sampler at the end of the run, then report.
  (void)pool.post_after(milliseconds(o.duration_ms), [&] { sampler.cancel(); });
  auto report = pool.submit_after(milliseconds(o.duration_ms + o.period_ms), [&] {
    std::lock_guard lock(mu);
    return samples.size();
  });
  const std::size_t taken = report.get();
  pool.wait_idle();

  std::printf("samples: %zu over %ld ms at %ld ms (about %ld expected)\n", taken, o.duration_ms,
              o.period_ms, o.duration_ms / o.period_ms);
  std::lock_guard lock(mu);
  std::printf("pending items per sample:");
  for (long s : samples) std::printf(" %ld", s);
  std::printf("\nitems left: %ld; withdrawn job cancelled: %s\n", pending.load(),
              withdrew ? "yes" : "no");
  return pending.load() == 0 && withdrew ? 0 : 1;
}
