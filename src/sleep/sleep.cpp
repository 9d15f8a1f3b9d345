// sleep/sleep.cpp: the deferral policy and the timed sleeper (sleep/README.md, "Deferred
// wake-ups").
#include "sleep/sleep.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "elastic/sizer.hpp"
#include "sleep/sleep_testing.hpp"

namespace spool::detail {
namespace {

// Every core but one may hold a polling worker (at least one may poll): the core left over
// is the submitter's, or an outside waiter's, so spinners never take the core of the thread
// that feeds them. In fork/join work, where workers run out of tasks and find more within
// microseconds, every worker that may not poll sleeps and costs a futex wake to get back: a
// cap of half the cores made fib(35) at 16 threads on 16 cores 1.7x slower (docs/decisions.md,
// "At most half the cores").
std::uint32_t max_spinners_for(unsigned threads) {
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1u, std::min(threads, cpus - 1));
}

std::atomic<std::uint32_t> cpus_override{0};  // scheduling_testing::set_cpus

// The CPUs this process may run on: what crowding is measured against.
std::uint32_t cpus_for_process() noexcept {
  if (const std::uint32_t n = cpus_override.load(std::memory_order_relaxed)) return n;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    return static_cast<std::uint32_t>(std::max(1, CPU_COUNT(&set)));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

namespace scheduling_testing {
void set_cpus(std::uint32_t n) noexcept { cpus_override.store(n, std::memory_order_relaxed); }
}  // namespace scheduling_testing

sleep_control::sleep_control(const config& cfg, unsigned min_threads, unsigned max_threads,
                             const roster& workers, const queues& work, const sizer& threads,
                             const quiescence& counts)
    : spin_rounds_(cfg.spin_rounds),
      defer_period_(cfg.defer_period),
      workers_(workers),
      work_(work),
      threads_(threads),
      counts_(counts),
      parker_(workers.capacity(), max_spinners_for(min_threads)),  // a seat per worker slot
      cpus_(cpus_for_process()),
      keep_awake_(std::max<std::uint32_t>(1, cpus_ - 1)),
      defer_(cfg.defer_period.count() > 0 && max_threads <= cpus_),
      retreats_(defer_ && max_threads > keep_awake_) {}

void sleep_control::outside_sleeps() noexcept {
  if (outside_active_.load(std::memory_order_relaxed) != 0) {
    outside_active_.store(0, std::memory_order_relaxed);
  }
  // Work may have been deferred while this thread took a core: hand it to a sleeper now.
  if (parker_.timed_listed() && work_.has_work()) parker_.notify_one();
}

bool sleep_control::crowded(std::uint32_t extra_asleep) const noexcept {
  if (!defer_ || outside_active_.load(std::memory_order_relaxed) == 0) return false;
  return awake_workers(extra_asleep) >= keep_awake_;
}

std::uint32_t sleep_control::awake_workers(std::uint32_t extra_asleep) const noexcept {
  const std::uint32_t idle = parker_.sleepers() + extra_asleep + threads_.blocked();
  const std::uint32_t live = threads_.live();
  return live > idle ? live - idle : 0;
}

bool sleep_control::retreat_listed(worker& w, bool* timed) noexcept {
  const std::uint32_t live = threads_.live();
  const std::uint32_t blocked = threads_.blocked();
  if (threads_.may_retire()) return false;
  // Not in a blocking region; more of them awake than keep_awake_ (this one included), as a
  // first look without the lock; then decided under it.
  if (live <= blocked || live - blocked <= parker_.sleepers() + keep_awake_) return false;
  if (w.has_local_work()) return false;
  return parker_.prepare_if_others_awake(w.index, live - blocked, keep_awake_, timed);
}

bool sleep_control::sleep_timed(worker& w) noexcept {
  // Entered listed, holding the timed role, after the protocol's last look. Each period ends
  // with this worker off the list and the role free (park_until); it then either leaves (to
  // the worker loop, which looks for work, takes it or parks again by the usual protocol) or
  // takes the role again for one more period. Deferred work is never left without a timed
  // sleeper: a notifier defers only while one is listed, and every period that ends with
  // work queued either takes it or re-lists a timed sleeper before sleeping again.
  (void)note_progress(w);
  for (;;) {
    const auto deadline = std::chrono::steady_clock::now() + defer_period_;
    const parker::wake how = parker_.park_until(w.index, deadline);
    if (how != parker::wake::timed_out) return how == parker::wake::searching;
    // Whether an outside thread submitted during the period (and clear it for the next).
    const std::uint32_t outside = outside_active_.exchange(0, std::memory_order_relaxed);
    const bool stuck = note_progress(w);
    const bool queued = work_.has_work();
    // Nothing to defer for: no outside thread submitted this period, or too few workers are
    // awake to crowd it and no outside thread that takes its tasks back submitted.
    if (outside == 0 || (awake_workers(1) < keep_awake_ && outside != k_outside_takes_back)) {
      return false;
    }
    // A worker ran one task for the whole period: it may be blocked, and the work queued
    // behind it must not wait for it.
    if (queued && stuck) {
      rescues_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    // Too few workers awake to crowd the pool: the deferral was for an outside thread that
    // takes its tasks back, and work still queued is work no such thread took back (a post it
    // does not wait for, or another thread's task). No awake worker will get to it: take it.
    if (queued && awake_workers(1) < keep_awake_) return false;
    // One more period. Queued work was seen above and is deferred to this sleeper's next
    // period: no last look (it would take the work). With nothing queued, the usual last look.
    if (!parker_.prepare(w.index, true)) {  // another sleeper took the role meanwhile
      parker_.cancel(w.index);
      return false;
    }
    if (threads_.terminating() || (!queued && work_.has_work())) {
      parker_.cancel(w.index);
      return false;
    }
  }
}

bool sleep_control::note_progress(const worker& self) noexcept {
  bool stuck = false;
  for (const auto& w : workers_.all()) {
    const std::uint64_t finished = counts_.finished_by(*w);
    if (w.get() != &self && counts_.running(*w) &&
        finished == w->progress_seen.load(std::memory_order_relaxed)) {
      stuck = true;
    }
    w->progress_seen.store(finished, std::memory_order_relaxed);
  }
  return stuck;
}

}  // namespace spool::detail
