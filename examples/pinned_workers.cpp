// pinned-workers: one worker pinned to each CPU this process may use, with hooks that report
// where each worker starts and stops, a pause that holds submitted work, and a resize.
//
//   ./pinned-workers
#include <sched.h>

#include <spool/spool.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <vector>

int main() {
  const std::vector<unsigned> cpus = spool::allowed_cpus();
  std::mutex out;  // keeps the hooks' lines whole

  spool::config cfg;
  cfg.threads = static_cast<unsigned>(cpus.size());
  cfg.thread_capacity = cfg.threads * 2;  // room for resize() below
  cfg.affinity = cpus;                    // worker i on cpus[i % cpus.size()]
  cfg.name = "pinned";
  cfg.on_worker_start = [&](unsigned i) {
    std::lock_guard lock(out);
    std::printf("worker %u starts on CPU %d\n", i, sched_getcpu());
  };
  cfg.on_worker_stop = [&](unsigned i) {
    std::lock_guard lock(out);
    std::printf("worker %u stops\n", i);
  };

  spool::pool pool{cfg};
  std::printf("%zu workers, topology-aware stealing: %s\n", pool.thread_count(),
              spool::topology_aware() ? "yes" : "no");

  // Paused, the pool accepts work but starts none of it.
  std::atomic<int> ran{0};
  pool.pause();
  for (int i = 0; i < 1000; ++i) pool.post([&] { ran.fetch_add(1, std::memory_order_relaxed); });
  const bool idle = pool.wait_idle_for(std::chrono::milliseconds(10));
  std::printf("paused: idle %s, %d of 1000 ran\n", idle ? "yes" : "no", ran.load());
  pool.resume();
  pool.wait_idle();
  std::printf("resumed: %d of 1000 ran\n", ran.load());

  // Twice the threads (the extra ones pinned round-robin too), then back.
  pool.resize(cfg.threads * 2, cfg.threads * 2);
  std::printf("resized up: %zu workers\n", pool.thread_count());
  pool.resize(cfg.threads, cfg.threads);
  pool.wait_idle();
  return 0;  // the destructor drains and joins; each worker's stop hook runs
}
