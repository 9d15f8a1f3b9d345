// core.cpp: the pool's lifecycle, submission and statistics. The worker loop and
// help-while-waiting are in worker.cpp.
#include "core.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <system_error>

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

const config& validated(const config& cfg) {
  const unsigned lo = min_threads_for(cfg);
  const unsigned hi = max_threads_for(cfg);
  if (lo < 1 || lo > hi)
    throw error(errc::invalid_argument, "spool: need 1 <= min_threads <= max_threads");
  if (hi > 1u << 16) throw error(errc::invalid_argument, "spool: max_threads above 65536");
  if (cfg.defer_period.count() < 0)
    throw error(errc::invalid_argument, "spool: defer_period must be >= 0");
  if (cfg.keep_alive.count() < 0 || cfg.monitor_min_interval.count() <= 0 ||
      cfg.monitor_max_interval < cfg.monitor_min_interval) {
    throw error(
        errc::invalid_argument,
        "spool: keep_alive must be >= 0 and 0 < monitor_min_interval <= monitor_max_interval");
  }
  return cfg;
}

// Lock-free lanes for this many distinct outside threads; later ones share the injector.
constexpr std::size_t k_producer_slots = 32;
// submit_bulk wakes a worker after the first task and then after every this many.
constexpr std::size_t k_bulk_notify = 64;

// Half the cores may poll for work at once (at least one): enough to catch the next task
// without a futex wake, few enough that spinners never crowd out the threads doing work.
std::uint32_t max_spinners_for(unsigned threads) {
  unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1u, std::min(threads, cpus) / 2);
}

std::atomic<std::uint32_t> cpus_override{0};  // scheduling_testing::set_cpus

// The CPUs this process may run on: what crowding is measured against (core::crowded).
std::uint32_t cpus_for_process() noexcept {
  if (const std::uint32_t n = cpus_override.load(std::memory_order_relaxed)) return n;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    return static_cast<std::uint32_t>(std::max(1, CPU_COUNT(&set)));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

template <class Field>
std::uint64_t sum(std::span<const std::unique_ptr<worker>> ws, const counters& outside,
                  Field field) {
  std::uint64_t total = (outside.*field).load(std::memory_order_relaxed);
  for (const auto& w : ws) total += (w->stats.*field).load(std::memory_order_relaxed);
  return total;
}

}  // namespace

core::core(const config& cfg)
    : cfg_(validated(cfg)),
      min_threads_(min_threads_for(cfg)),
      max_threads_(max_threads_for(cfg)),
      elastic_(max_threads_ > min_threads_),
      injector_(cfg.queue_capacity, cfg.on_full, cfg.block_timeout),
      slots_(cfg.queue_capacity == 0 ? k_producer_slots : 0),
      parker_(max_threads_, max_spinners_for(min_threads_)),
      workers_(new std::unique_ptr<worker>[max_threads_]),
      cpus_(cpus_for_process()),
      keep_awake_(std::max<std::uint32_t>(1, cpus_ - 1)),
      defer_(cfg_.defer_period.count() > 0 && max_threads_ <= cpus_) {
  for (unsigned i = 0; i < min_threads_; ++i) {
    if (std::error_code ec = grow(scale_event::cause::initial)) {
      stop_workers();
      throw error(static_cast<errc>(ec.value()), "spool: could not start the worker threads");
    }
  }
  if (elastic_) {
    try {
      monitor_ = std::thread([this] { monitor_main(); });
    } catch (const std::system_error& e) {
      stop_workers();
      throw error(errc::system, e.what());
    }
  }
}

core::~core() = default;

worker* core::own_worker() const noexcept {
  worker* w = current_worker();
  return w != nullptr && &w->owner == this ? w : nullptr;
}

bool core::is_own_worker() const noexcept { return own_worker() != nullptr; }

std::error_code core::submit(task* t, priority p) noexcept {
  // Each path counts the submission (in exactly one counter) before the task becomes visible,
  // so quiescent() can never see it finished but not submitted; a refusal undoes the count.
  if (worker* w = own_worker()) {
    tally(w, &counters::submitted, 1);
    // From inside the pool: the worker's own deque (or, for another priority, the injector
    // past its bound), never blocking. Accepted while draining (it is part of finishing
    // queued work); refused while discarding.
    if (discarding_.load(std::memory_order_acquire)) return refuse(w, t, errc::shut_down);
    if (p == priority::normal) {
      try {
        w->deque.push(t);
      } catch (...) {
        return refuse(w, t, errc::no_memory);
      }
    } else if (std::error_code err = injector_.push(t, p, /*bypass_bound=*/true).error) {
      return refuse(w, t, err);
    }
    notify_worker();
    return {};
  }

  // From outside the pool (another pool's worker is an outsider here too).
  if (p == priority::normal) {
    if (producer_slot* slot = slots_.mine()) return submit_to_slot(*slot, t);
  }

  tally(nullptr, &counters::submitted, 1);
  // A producer about to wait for room stops taking a core (see outside_sleeps).
  if (cfg_.queue_capacity != 0 && injector_.size() >= cfg_.queue_capacity &&
      (cfg_.on_full == full_policy::block || cfg_.on_full == full_policy::block_for)) {
    outside_sleeps();
  }
  auto [err, evicted] = injector_.push(t, p);
  if (evicted != nullptr) {  // discard_oldest: the queue is not empty, so no idle waiter to tell
    evicted->cancel();
    tally(nullptr, &counters::cancelled, 1);
  }
  if (!err) {
    accepted_outside_.fetch_add(1, std::memory_order_relaxed);
    note_outside();
    notify_worker();
    return {};
  }
  if (err == errc::full && cfg_.on_full == full_policy::caller_runs) {
    accepted_outside_.fetch_add(1, std::memory_order_relaxed);
    execute(nullptr, t);
    notify_idle_waiters();
    return {};
  }
  return refuse(nullptr, t, err);
}

bulk_result core::submit_bulk(std::size_t n, task* (*make)(void*, std::size_t),
                              void* context) noexcept {
  bulk_result r;
  if (n == 0) return r;
  worker* w = own_worker();
  const bool own = w != nullptr;
  producer_slot* slot = own ? nullptr : slots_.mine();
  if (!own && slot == nullptr) {
    // Through the injector (a bounded pool, or more outside threads than slots): each task
    // meets the bound and the policy on its own.
    for (; r.accepted < n; ++r.accepted) {
      task* t = make(context, r.accepted);
      if (t == nullptr) {
        r.error = errc::no_memory;
        break;
      }
      if ((r.error = submit(t))) break;
    }
    return r;
  }

  r.error = enter_batch(w, slot, n);
  ws_deque& deque = own ? w->deque : slot->deque;
  while (!r.error && r.accepted < n) {
    task* t = make(context, r.accepted);
    if (t == nullptr) {
      r.error = errc::no_memory;
      break;
    }
    try {
      deque.push(t);
    } catch (...) {
      t->destroy();
      r.error = errc::no_memory;
      break;
    }
    // Wake a worker with the first task and every k_bulk_notify after it, not only at the
    // end: the workers then run the batch while it is still being made (and while its tasks
    // are still in this core's cache), and one that emptied the deque and slept meanwhile is
    // woken again. A notify that finds a spinner or no sleeper costs a fence and two loads.
    if (++r.accepted % k_bulk_notify == 1) notify_worker();
  }
  if (const std::uint64_t refused = n - r.accepted; refused != 0) {
    leave_batch(w, slot, refused);
  }
  if (r.accepted != 0) {
    if (!own) add_owned(slot->accepted, r.accepted);
    notify_worker();  // the woken worker passes the baton on (wake_for_surplus)
  }
  return r;
}

std::error_code core::enter_batch(worker* w, producer_slot* slot, std::size_t n) noexcept {
  // Counted for the whole batch before any task is visible (quiescence, as in submit()). For a
  // slot, the closed check follows the count with a full barrier, once for the batch (see
  // submit_to_slot).
  if (w != nullptr) {
    tally(w, &counters::submitted, n);
    return discarding_.load(std::memory_order_acquire) ? errc::shut_down : std::error_code{};
  }
  add_owned(slot->entered, n);
  note_outside();
  return closed_after_barrier() ? errc::shut_down : std::error_code{};
}

void core::leave_batch(worker* w, producer_slot* slot, std::size_t refused) noexcept {
  rejected_.fetch_add(refused, std::memory_order_relaxed);
  if (w != nullptr) {
    tally(w, &counters::submitted, 0 - refused);
  } else {
    add_owned(slot->entered, 0 - refused);
  }
  notify_idle_waiters();  // the undone count may be what makes the pool quiescent
}

std::error_code core::submit_to_slot(producer_slot& slot, task* t) noexcept {
  // Counted, then the closed check, with a full barrier between: close() sets the flag and
  // then reads these counts (wait_quiescent), so either we see the flag and back out, or the
  // shutdown sees our count and waits for the task, which the workers will find in the slot.
  add_owned(slot.entered, 1);
  std::error_code why;
  if (closed_after_barrier()) {
    why = errc::shut_down;
  } else {
    try {
      slot.deque.push(t);
    } catch (...) {
      why = errc::no_memory;
    }
  }
  if (why) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    t->destroy();
    add_owned(slot.entered, ~std::uint64_t{0});  // minus one
    notify_idle_waiters();
    return why;
  }
  add_owned(slot.accepted, 1);
  note_outside();
  notify_worker();
  return {};
}

bool core::note_progress(const worker& self) noexcept {
  bool stuck = false;
  for (const auto& w : workers()) {
    const std::uint64_t finished = w->stats.finished(std::memory_order_relaxed);
    if (w.get() != &self && w->depth.load(std::memory_order_relaxed) != 0 &&
        finished == w->progress_seen.load(std::memory_order_relaxed)) {
      stuck = true;
    }
    w->progress_seen.store(finished, std::memory_order_relaxed);
  }
  return stuck;
}

bool core::closed_after_barrier() noexcept { return load_after_full_barrier(closed_) != 0; }

std::error_code core::refuse(worker* w, task* t, std::error_code why) noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);
  t->destroy();
  tally(w, &counters::submitted, ~std::uint64_t{0});  // minus one
  // The undone count may be what makes the pool quiescent.
  notify_idle_waiters();
  return why;
}

void core::tally(worker* w, std::atomic<std::uint64_t> counters::*field,
                 std::uint64_t delta) noexcept {
  if (w != nullptr) {
    // Only w's thread writes its counters; a reader that sees a task counted as finished also
    // sees it counted as submitted (quiescent()).
    add_owned(w->stats.*field, delta);
  } else {
    (outside_.*field).fetch_add(delta, std::memory_order_seq_cst);
  }
}

bool core::quiescent() const noexcept {
  // Finished first, then submitted. Each task is counted submitted before it can be counted
  // finished, and accepted tasks are never uncounted, so equal sums mean that at the moment
  // the finished counters were read, every accepted task had finished (src/README.md).
  // A slot created after the finished loop read created_ has counted nothing yet that the
  // submitted loop could see finished: its counters start at zero, like its thread's work.
  std::uint64_t finished = outside_.finished(std::memory_order_acquire);
  for (const auto& w : workers()) finished += w->stats.finished(std::memory_order_acquire);
  std::uint64_t submitted = outside_.submitted.load(std::memory_order_acquire);
  for (const auto& w : workers()) submitted += w->stats.submitted.load(std::memory_order_acquire);
  for (std::size_t i = 0, n = slots_.in_use(); i < n; ++i) {
    submitted += slots_[i].entered.load(std::memory_order_acquire);
  }
  return finished == submitted;
}

void core::notify_idle_waiters() noexcept {
  // Pairs with wait_quiescent(): each side updates its own counter, then (after a full
  // barrier) reads the other's, so a waiter either sees the update or is seen here.
  if (load_after_full_barrier(idle_waiters_) == 0) return;
  // Wake the waiter only for a pool it will find quiescent. Every change that can make the
  // pool quiescent is followed, in its thread, by that barrier and this check; of the
  // threads making the last such changes, the one whose barrier comes last sees all of them
  // and wakes the waiter (src/README.md, "Waiting for idle"). Without the check, the tail of
  // a burst woke the waiter once per worker going idle, only for it to sleep again.
  if (!quiescent()) return;
  std::lock_guard lock(idle_mu_);
  idle_cv_.notify_all();
}

void core::wait_quiescent() noexcept {
  outside_sleeps();  // only outside threads get here: wait_idle and shutdown refuse workers
  idle_waiters_.fetch_add(1, std::memory_order_seq_cst);
#ifndef SPOOL_TSAN
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  {
    std::unique_lock lock(idle_mu_);
    idle_cv_.wait(lock, [this] { return quiescent(); });
  }
  idle_waiters_.fetch_sub(1, std::memory_order_relaxed);
}

std::error_code core::wait_idle() noexcept {
  if (is_own_worker()) return errc::would_deadlock;
  wait_quiescent();
  return {};
}

void core::close() noexcept {
  // A read-modify-write, so that under ThreadSanitizer (no fences) it still synchronises with
  // submit_to_slot's read of the flag.
  closed_.exchange(1, std::memory_order_seq_cst);
  injector_.close();
}

std::error_code core::shutdown(shutdown_mode mode, std::size_t* dropped) noexcept {
  if (is_own_worker()) return errc::would_deadlock;
  std::lock_guard lock(shutdown_mu_);
  const std::uint64_t before = dropped_.load(std::memory_order_relaxed);
  if (!joined_) {
    // Discarding is decided before the close is announced: whoever learns that the pool is
    // shut down (a producer woken with shut_down) can rely on queued tasks never running.
    if (mode == shutdown_mode::discard) discarding_.store(true, std::memory_order_seq_cst);
    close();
    if (mode == shutdown_mode::discard) drop_queued();
    // Draining or discarding, every accepted task leaves through execute() or drop(), which
    // count it finished; quiescent means nothing is queued or running, so nothing can be added.
    wait_quiescent();
    stop_workers();
    joined_ = true;
  }
  if (dropped != nullptr) *dropped = dropped_.load(std::memory_order_relaxed) - before;
  return {};
}

void core::drop_queued() noexcept {
  // The injector is closed and worker submissions are refused, so this sweep only shrinks the
  // queues. A running task may still push after it (it read discarding_ just before it was
  // set); execute() cancels such a task when a worker takes it.
  while (task* t = injector_.pop()) drop(nullptr, t);
  // `take` is a deque's steal or a batch's take: both say "retry" when they lost a race.
  auto sweep = [this](auto take) {
    for (;;) {
      auto [t, retry] = take();
      if (t != nullptr) {
        drop(nullptr, t);
      } else if (!retry) {
        return;
      }
    }
  };
  for (const auto& w : workers()) {
    sweep([&] { return w->deque.steal(); });
    sweep([&] { return w->batch.take(); });
  }
  for (std::size_t i = 0, n = slots_.in_use(); i < n; ++i) {
    sweep([&] { return slots_[i].deque.steal(); });
  }
}

void core::drop(worker* w, task* t) noexcept {
  t->cancel();
  dropped_.fetch_add(1, std::memory_order_relaxed);
  tally(w, &counters::cancelled, 1);
  notify_idle_waiters();
}

void core::stop_workers() noexcept {
  {
    // Under scale_mu_, so that no thread starts after this (grow() checks terminate_ under
    // it) and no worker retires (try_retire() does too): every slot's thread is ours to join.
    std::lock_guard lock(scale_mu_);
    terminate_.store(true, std::memory_order_seq_cst);
  }
  parker_.notify_all();
  if (monitor_.joinable()) {
    {
      std::lock_guard lock(monitor_mu_);
      monitor_stop_ = true;
    }
    monitor_cv_.notify_all();
    monitor_.join();
  }
  for (const auto& w : workers()) {
    if (!w->thread.joinable()) continue;
    const bool was_running = w->state == worker::slot_state::running;
    w->thread.join();
    w->state = worker::slot_state::free;
    w->active.store(false, std::memory_order_relaxed);
    if (was_running) {
      emit(scale_event::kind::retired, scale_event::cause::shutdown, w->index,
           live_.load(std::memory_order_relaxed));
    }
  }
}

stats core::snapshot() const noexcept {
  stats s;
  s.threads_live = live_.load(std::memory_order_relaxed);
  s.queued = injector_.size();
  for (const auto& w : workers()) {
    if (w->depth.load(std::memory_order_relaxed) != 0) ++s.threads_busy;
    s.queued += w->deque.size() + w->batch.size();
  }
  // outside_.submitted also counts submissions still waiting for room; report accepted ones.
  s.submitted = accepted_outside_.load(std::memory_order_relaxed);
  for (const auto& w : workers()) s.submitted += w->stats.submitted.load(std::memory_order_relaxed);
  for (std::size_t i = 0, n = slots_.in_use(); i < n; ++i) {
    s.submitted += slots_[i].accepted.load(std::memory_order_relaxed);
    s.queued += slots_[i].deque.size();
  }
  s.completed = sum(workers(), outside_, &counters::completed);
  s.failed = sum(workers(), outside_, &counters::failed);
  s.cancelled = sum(workers(), outside_, &counters::cancelled);
  s.stolen = sum(workers(), outside_, &counters::stolen);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.threads_blocked = blocked_.load(std::memory_order_relaxed);
  s.threads_started = threads_started_.load(std::memory_order_relaxed);
  s.threads_retired = threads_retired_.load(std::memory_order_relaxed);
  s.grown_for_load = grown_for_load_.load(std::memory_order_relaxed);
  s.grown_for_blocking = grown_for_blocking_.load(std::memory_order_relaxed);
  return s;
}

void core::enter_blocking(worker& w) noexcept {
  if (w.blocking++ != 0) return;  // nested: counted once
  const std::uint32_t blocked = blocked_.fetch_add(1, std::memory_order_relaxed) + 1;
  // Keep min_threads workers free to run: start a compensating thread now rather than wait
  // for the monitor to notice the stall. It retires after keep_alive once it is not needed.
  if (elastic_ && live_.load(std::memory_order_relaxed) < min_threads_ + blocked) {
    (void)grow(scale_event::cause::blocking);  // at max_threads, or the OS refused: carry on
  }
}

void core::leave_blocking(worker& w) noexcept {
  if (--w.blocking == 0) blocked_.fetch_sub(1, std::memory_order_relaxed);
}

void core::report_exception(std::exception_ptr e) noexcept {
  if (cfg_.on_exception) {
    try {
      cfg_.on_exception(e);
      return;
    } catch (...) {
      std::fputs("spool: the on_exception handler threw; reporting here instead\n", stderr);
    }
  }
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "spool: a posted task threw: %s\n", ex.what());
  } catch (...) {
    std::fputs("spool: a posted task threw a non-std::exception\n", stderr);
  }
}

namespace scheduling_testing {
void set_cpus(std::uint32_t n) noexcept { cpus_override.store(n, std::memory_order_relaxed); }
}  // namespace scheduling_testing

void report_exception(core& owner, std::exception_ptr e) noexcept {
  owner.report_exception(std::move(e));
}

}  // namespace spool::detail
