// core.cpp: the pool's lifecycle (construction, close, shutdown) and its statistics.
#include "core.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <system_error>
#include <thread>

namespace spool::detail {
namespace {

unsigned threads_for(const config& cfg) {
  if (cfg.threads != 0) return cfg.threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

unsigned min_threads_for(const config& cfg) {
  return cfg.min_threads != 0 ? cfg.min_threads : threads_for(cfg);
}

unsigned max_threads_for(const config& cfg) {
  return cfg.max_threads != 0 ? cfg.max_threads : std::max(min_threads_for(cfg), threads_for(cfg));
}

unsigned capacity_for(const config& cfg) {
  return cfg.thread_capacity != 0 ? cfg.thread_capacity : max_threads_for(cfg);
}

const config& validated(const config& cfg) {
  const unsigned lo = min_threads_for(cfg);
  const unsigned hi = max_threads_for(cfg);
  if (lo < 1 || lo > hi)
    throw error(errc::invalid_argument, "spool: need 1 <= min_threads <= max_threads");
  if (hi > 1u << 16) throw error(errc::invalid_argument, "spool: max_threads above 65536");
  if (capacity_for(cfg) < hi || capacity_for(cfg) > 1u << 16) {
    throw error(errc::invalid_argument, "spool: need max_threads <= thread_capacity <= 65536");
  }
  if (!cfg.affinity.empty()) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
      throw error(errc::system, "spool: sched_getaffinity failed");
    }
    for (unsigned cpu : cfg.affinity) {
      if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) {
        throw error(errc::invalid_argument, "spool: affinity names CPU " + std::to_string(cpu) +
                                                ", which this process may not use");
      }
    }
  }
  if (cfg.defer_period.count() < 0)
    throw error(errc::invalid_argument, "spool: defer_period must be >= 0");
  if (cfg.on_full < full_policy::block || cfg.on_full > full_policy::discard_oldest)
    throw error(errc::invalid_argument, "spool: on_full is not a full_policy");
  if (cfg.block_timeout.count() < 0)
    throw error(errc::invalid_argument, "spool: block_timeout must be >= 0");
  if (cfg.drain_timers_within.count() < 0)
    throw error(errc::invalid_argument, "spool: drain_timers_within must be >= 0");
  if (cfg.keep_alive.count() < 0 || cfg.monitor_min_interval.count() <= 0 ||
      cfg.monitor_max_interval < cfg.monitor_min_interval) {
    throw error(
        errc::invalid_argument,
        "spool: keep_alive must be >= 0 and 0 < monitor_min_interval <= monitor_max_interval");
  }
  return cfg;
}

}  // namespace

core::core(const config& cfg, std::uint32_t stamp)
    : cfg_(validated(cfg)),
      stamp_(stamp),
      min_threads_(min_threads_for(cfg)),
      max_threads_(max_threads_for(cfg)),
      workers_(*this, capacity_for(cfg)),
      queues_(cfg_, workers_, sleep_),
      threads_(cfg_, min_threads_, max_threads_, capacity_for(cfg), workers_, queues_),
      sleep_(cfg_, min_threads_, max_threads_, workers_, queues_, threads_, idle_),
      idle_(workers_, queues_.slots()),
      timers_(*this, cfg_.name) {
  if (cfg_.on_task_start || cfg_.on_task_finish) {
    gate_.trace();  // before any thread starts
  }
  enable_asymmetric_barriers();  // before the first thread (sync/dekker.hpp)
  for (unsigned i = 0; i < min_threads_; ++i) {
    if (std::error_code ec = threads_.grow(scale_event::cause::initial)) {
      stop_workers();
      throw error(static_cast<errc>(ec.value()), "spool: could not start the worker threads");
    }
  }
  try {
    threads_.start_monitor();
  } catch (const std::system_error& e) {
    stop_workers();
    throw error(errc::system, e.what());
  }
}

core::~core() = default;

std::error_code core::wait_idle() noexcept {
  if (is_own_worker() || runs_own_task_here()) return errc::would_deadlock;
  wait_quiescent();
  return {};
}

std::error_code core::wait_idle_until(std::chrono::steady_clock::time_point deadline,
                                      bool* idle) noexcept {
  if (is_own_worker() || runs_own_task_here()) return errc::would_deadlock;
  sleep_.outside_sleeps();
  *idle = idle_.wait_until(deadline);
  return {};
}

std::error_code core::resize(unsigned min_threads, unsigned max_threads) noexcept {
  const std::error_code ec = threads_.resize(min_threads, max_threads);
  if (ec == errc::invalid_argument) return ec;
  // Workers that parked without a deadline (at or below the old min) or with one computed
  // from the old bounds look again: above the new max they retire at once, above the new min
  // after keep_alive (rest()).
  sleep_.wake_all();
  return ec;
}

std::error_code core::pause() noexcept {
  // Before the gate closes: the monitor must not take held workers for stalled ones.
  return gate_.pause([this] { threads_.hold_growth(true); });
}

void core::resume() noexcept {
  if (!gate_.resume([this] { threads_.hold_growth(false); })) return;
  // Submissions made while paused woke at most one sleeper each, and a worker holding a task
  // passed no baton on: wake one for the queued work, and it passes the baton in turn.
  sleep_.wake_for_surplus();
}

bool core::pass_gate(worker* w, work_item* t) noexcept {
  // The gate is closed (paused, discarding, or traced: then this passes at once). A pause holds
  // this thread, with t, until resume() or shutdown() opens it (gate::hold_while_paused). Tasks
  // it held count as neither queued nor running.
  gate_.hold_while_paused();
  if (discarding()) {
    drop(w, t);
    return false;
  }
  return true;
}

void core::wait_quiescent() noexcept {
  sleep_.outside_sleeps();  // only outside threads get here: wait_idle and shutdown refuse workers
  idle_.wait();
}

void core::close() noexcept {
  // A read-modify-write, so that under ThreadSanitizer (no fences) it still synchronises with
  // submit_to_slot's read of the flag; then the heavy barrier, the rare side of that pairing,
  // before anyone reads the submitters' counts.
  closed_.exchange(1, std::memory_order_seq_cst);
  heavy_barrier();
  queues_.shared().close();
}

std::error_code core::shutdown(shutdown_mode mode, std::size_t* dropped) noexcept {
  shutdown_report report;
  const std::error_code ec = shutdown(mode, nullptr, &report);
  if (dropped != nullptr) *dropped = report.dropped;
  return ec;
}

std::error_code core::shutdown(shutdown_mode mode,
                               const std::chrono::steady_clock::time_point* deadline,
                               shutdown_report* report) noexcept {
  if (is_own_worker() || runs_own_task_here()) return errc::would_deadlock;
  std::lock_guard lock(shutdown_mu_);
  const std::uint64_t before = counts_.dropped_so_far();
  shutdown_report r;
  if (!joined_) {
    // Those given the pool's stop token learn first, while the pool still takes their work
    // (a coroutine cancelled by it resumes on a worker; a task started with it is dropped).
    stop_.request_stop();
    // Timers first, while the pool still accepts their tasks (src/timers/README.md,
    // "Shutdown"): a drain lets the one-shot timers due by its cutoff fire (by the deadline,
    // or within config::drain_timers_within) and drops the rest and the periodic ones;
    // discard drops them all. Never a wait on a clock beyond that cutoff.
    using clock = std::chrono::steady_clock;
    clock::time_point cutoff = clock::time_point::min();
    if (mode == shutdown_mode::drain) {
      cutoff = deadline != nullptr ? *deadline : deadline_after(cfg_.drain_timers_within);
    }
    r.timers_dropped = timers_.stop(cutoff);
    // Discarding is decided before the close is announced: whoever learns that the pool is
    // shut down (a producer woken with shut_down) can rely on queued tasks never running.
    if (mode == shutdown_mode::discard) gate_.start_discarding();
    close();
    // The injector is closed and worker submissions are refused, so this sweep only shrinks
    // the queues. A running task may still push after it (it read the gate just before it
    // was set); execute() cancels such a task when a worker takes it.
    if (mode == shutdown_mode::discard) queues_.drain([this](work_item* t) { drop(nullptr, t); });
    // A paused pool is resumed for good: held tasks run (drain) or are dropped (discard), and
    // no later pause() can stop the drain.
    gate_.stop();
    resume();
    // A drain with a deadline that is not done by then discards what is left, as above; the
    // tasks running then finish (they are not interrupted).
    if (mode == shutdown_mode::drain && deadline != nullptr) {
      sleep_.outside_sleeps();
      if (!idle_.wait_until(*deadline)) {
        r.timed_out = true;
        gate_.start_discarding();
        queues_.drain([this](work_item* t) { drop(nullptr, t); });
      }
    }
    // Draining or discarding, every accepted task leaves through execute() or drop(), which
    // count it finished; quiescent means nothing is queued or running, so nothing can be added.
    wait_quiescent();
    stop_workers();
    joined_ = true;
  }
  r.dropped = counts_.dropped_so_far() - before + r.timers_dropped;
  if (report != nullptr) *report = r;
  return {};
}

void core::drop(worker* w, work_item* t) noexcept {
  t->cancel();
  counts_.dropped();
  idle_.tally(w, &counters::cancelled, 1);
  idle_.notify();
}

void core::stop_workers() noexcept {
  threads_.begin_stop();
  sleep_.wake_all();
  threads_.stop();
}

stats core::snapshot() const noexcept {
  stats s;
  threads_.fill(s);
  s.queued = queues_.size();
  // Each part adds its share: the per-task counts are quiescence's, the pool-wide ones (the
  // outsiders' accepted tasks, refusals) the statistics part's.
  idle_.fill(s);
  counts_.fill(s);
  return s;
}

void core::report_exception(const std::exception_ptr& e, thrown_by source) noexcept {
  if (cfg_.on_exception) {
    try {
      cfg_.on_exception(e);
      return;
    } catch (...) {
      std::fputs("spool: the on_exception handler threw; reporting here instead\n", stderr);
    }
  }
  const char* what_threw = "a posted task threw";
  switch (source) {
    case thrown_by::posted_task:
      break;
    case thrown_by::timer:
      what_threw = "a timer's task threw";
      break;
    case thrown_by::timer_refused:
      what_threw = "a timer came due after the pool closed and did not run";
      break;
    case thrown_by::unwaited_group:
      what_threw = "a task of a task_group destroyed without wait() threw";
      break;
    case thrown_by::group_callback:
      what_threw = "a task_group's on_finished callback threw";
      break;
  }
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "spool: %s: %s\n", what_threw, ex.what());
  } catch (...) {
    std::fprintf(stderr, "spool: %s a non-std::exception\n", what_threw);
  }
}

void report_exception(core& owner, const std::exception_ptr& e, thrown_by source) noexcept {
  owner.report_exception(e, source);
}

}  // namespace spool::detail
