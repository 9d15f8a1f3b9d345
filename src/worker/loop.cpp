// worker.cpp: what a worker thread does: find a task (own deque, then the injector, then
// steal), run it, and sleep in the parker when there is none. help_until() is the same loop
// run by a worker that waits on a future.
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "core.hpp"
#include "sync/cpu_relax.hpp"

namespace spool::detail {
namespace {

// initial-exec: read on every submission (src/README.md, "Thread-local storage").
[[gnu::tls_model("initial-exec")]] thread_local worker* tls_worker = nullptr;

// Rounds of core::spin that only pause before later rounds yield (about 3 us on this project's
// machine; see core::spin).
constexpr unsigned k_pause_rounds = 8;

void name_thread(const std::string& prefix, unsigned index) noexcept {
  std::string name = prefix + "-" + std::to_string(index);
  name.resize(std::min<std::size_t>(name.size(), 15));  // the kernel's limit
  pthread_setname_np(pthread_self(), name.c_str());
}

}  // namespace

worker* current_worker() noexcept { return tls_worker; }

worker* blocking_begin() noexcept {
  worker* w = tls_worker;
  if (w != nullptr) w->owner.enter_blocking(*w);
  return w;
}

void blocking_end() noexcept {
  if (worker* w = tls_worker) w->owner.leave_blocking(*w);
}

void core::worker_main(worker& w) noexcept {
  tls_worker = &w;
  name_thread(cfg_.name, w.index);
  clockid_t cpu;
  if (pthread_getcpuclockid(pthread_self(), &cpu) == 0) {
    w.cpu_clock.store(static_cast<int>(cpu), std::memory_order_relaxed);
  }
  w.tid.store(static_cast<int>(gettid()), std::memory_order_relaxed);
  bool retired = false;
  bool was_idle = true;  // w.idle mirrors it, for the monitor
  // A new thread counts as idle from its start: one that finds nothing to do (the work that
  // started it was taken by another) still waits keep_alive before it retires.
  std::chrono::steady_clock::time_point idle_since = std::chrono::steady_clock::now();
  auto go_idle = [&] {
    was_idle = true;
    w.idle.store(true, std::memory_order_relaxed);
    if (elastic_) idle_since = std::chrono::steady_clock::now();
  };
  auto take = [&](task* t) {
    if (was_idle) {
      was_idle = false;
      became_busy(w);
      wake_for_surplus();
    }
    execute(&w, t);
  };
  // Woken by notify_one, this thread counts as a spinner until it has looked for work once
  // (parker::wake::searching); it then stops, as a spinner does, and either takes what it
  // found (and wake_for_surplus passes the baton on) or looks again before parking.
  bool searching = false;
  for (;;) {
    task* found = find_task(w);
    if (searching) {
      searching = false;
      parker_.stop_spinning();
    }
    if (found != nullptr) {
      take(found);
      // A crowded pool's extra worker leaves the queued work to the others and sleeps (see
      // retreat); work it leaves is deferred work, which a timed sleeper watches.
      bool timed = false;
      if (retreat(w, &timed)) {
        go_idle();
        notify_idle_waiters();
        if (terminate_.load(std::memory_order_seq_cst)) {
          parker_.cancel(w.index);
          continue;
        }
        searching = timed ? sleep_timed(w) : parker_.park(w.index) == parker::wake::searching;
      }
      continue;
    }
    if (!was_idle) go_idle();
    if (spin(w, [] { return false; })) continue;
    // Above min_threads a worker sleeps at most until it has been idle for keep_alive, then
    // retires. At or below it sleeps without a timeout (an idle pool makes no wake-ups), or,
    // holding the timed role while the pool is crowded, period by period (sleep_timed).
    const bool may_retire = elastic_ && live_.load(std::memory_order_relaxed) > min_threads_;
    // The parker's protocol: announce, look once more, then sleep (src/README.md).
    const bool timed = parker_.prepare(w.index, !may_retire && crowded(1));
    // Every worker passes here before it sleeps, so the last one to go idle tells wait_idle().
    notify_idle_waiters();
    if (terminate_.load(std::memory_order_seq_cst)) {
      parker_.cancel(w.index);
      break;
    }
    if (task* t = find_task(w)) {
      parker_.cancel(w.index);  // a spinner's count it held is given back; take() passes it on
      take(t);
      continue;
    }
    if (timed) {
      searching = sleep_timed(w);
      continue;
    }
    if (!may_retire) {
      searching = parker_.park(w.index) == parker::wake::searching;
      continue;
    }
    const parker::wake how = parker_.park_until(w.index, idle_since + cfg_.keep_alive);
    if (how != parker::wake::timed_out) {
      searching = how == parker::wake::searching;
      continue;
    }
    // Idle for keep_alive and no longer among the sleepers: look once more (a waker that saw
    // us in `sleepers` before park_until() took us out may have woken nobody), then retire.
    if (task* t = find_task(w)) {
      take(t);
      continue;
    }
    if (try_retire(w)) {
      retired = true;
      break;
    }
  }
  w.idle.store(true, std::memory_order_relaxed);
  if (!retired) live_.fetch_sub(1, std::memory_order_relaxed);
  tls_worker = nullptr;
}

task* core::find_task(worker& w) noexcept {
  // Priorities (src/README.md, "Priorities"): high first, then this worker's own deque, the
  // injector's normal level and stealing, then low. Aging lets a low task that has waited
  // cfg_.aging go ahead of normal work, and a run of high tasks that has lasted cfg_.aging
  // let one normal task through.
  // One load of the injector's total first: a pool whose injector is empty (an unbounded pool
  // using normal priority) pays nothing more for priorities on this path.
  const bool injected = !injector_.empty();
  if (injected && injector_.queued(priority::high) != 0) {
    if (task* t = take_high(w)) return t;
  }
  w.high_streak = false;
  if (injected && ++w.searches % 64 == 0 && cfg_.aging.count() > 0 &&
      injector_.queued(priority::low) != 0 &&
      std::chrono::steady_clock::now() - injector_.oldest_low() >= cfg_.aging) {
    if (task* t = injector_.pop(priority::low)) return t;
  }
  if (task* t = find_normal(w)) return t;
  return injector_.pop(priority::low);
}

task* core::find_normal(worker& w) noexcept {
  if (task* t = w.deque.pop()) return t;
  // A run this worker took from a producer slot. Taken from the front like anyone else's, so
  // a retry only means a thief took that entry: look again.
  for (;;) {
    auto [t, retry] = w.batch.take();
    if (t != nullptr) return t;
    if (!retry) break;
  }
  if (task* t = injector_.pop(priority::normal)) return t;
  return steal(w);
}

task* core::take_high(worker& w) noexcept {
  if (cfg_.aging.count() > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (!w.high_streak) {
      w.high_streak = true;
      w.high_since = now;
    } else if (now - w.high_since >= cfg_.aging) {
      // High-priority work has held this worker for cfg_.aging: one normal task goes first.
      if (task* t = find_normal(w)) {
        w.high_streak = false;
        return t;
      }
    }
  }
  return injector_.pop(priority::high);
}

task* core::steal(worker& w) noexcept {
  // Victims: the other workers' deques, then their stolen batches, then the outside threads'
  // slots, which are taken from a run at a time (stolen_batch.hpp).
  //
  // Order. A producer's tasks must start in submission order, so a slot's tasks are taken
  // only once every batch holding earlier tasks of that slot is empty. Two rules give that:
  //  - A batch is filled from a slot only under the slot's `batching` try-lock, and only after
  //    checking, under the lock, that no worker's batch still holds tasks from that slot. So
  //    at any moment at most one batch holds a given slot's tasks, and they are older than
  //    every task still in the slot.
  //  - Batches are searched before slots. A busy lock or a batch with that slot's tasks means
  //    someone else serves the slot (take_from_slot): this searcher may stop, and the
  //    parker's last look before it sleeps catches whatever that leaves.
  const auto ws = workers();
  const std::size_t n = ws.size();
  if (w.batch_hint < n && ws[w.batch_hint].get() != &w) {
    // While one producer's burst is served, its tasks sit in one batch at a time: try the
    // last batch that gave a task before walking every deque and batch. A lost race here is
    // settled by the full search below.
    if (task* t = ws[w.batch_hint]->batch.take().item) return t;
  }
  for (int round = 0;; ++round) {
    const std::size_t slots = slots_.in_use();
    if (n < 2 && slots == 0) return nullptr;
    bool contended = false;
    if (n >= 2) {
      // xorshift64: a cheap random first victim, so thieves do not all hit worker 0.
      w.rng ^= w.rng << 13;
      w.rng ^= w.rng >> 7;
      w.rng ^= w.rng << 17;
      const std::size_t start = static_cast<std::size_t>(w.rng % n);
      for (std::size_t k = 0; k < n; ++k) {
        worker& victim = *ws[(start + k) % n];
        if (&victim == &w) continue;
        auto [t, retry] = victim.deque.steal();
        if (t != nullptr) {
          tally(&w, &counters::stolen, 1);
          return t;
        }
        contended |= retry;
      }
      for (std::size_t k = 0; k < n; ++k) {
        worker& victim = *ws[(start + k) % n];
        if (&victim == &w) continue;
        auto [t, retry] = victim.batch.take();
        if (t != nullptr) {
          w.batch_hint = (start + k) % n;
          return t;
        }
        contended |= retry;
      }
    }
    for (std::size_t i = 0; i < slots; ++i) {
      auto [t, retry] = take_from_slot(w, slots_[i]);
      if (t != nullptr) return t;
      contended |= retry;
    }
    // A lost race means that deque or batch was not empty; giving up now could leave its
    // tasks to an owner that is blocked, so look again until every one is seen empty. After
    // the first rounds, yield between them: on an oversubscribed pool the winners of those
    // races may be waiting for this core.
    if (!contended) return nullptr;
    if (round >= 2) sched_yield();
  }
}

ws_deque::steal_result core::take_from_slot(worker& w, producer_slot& slot) noexcept {
  if (slot.deque.empty()) return {nullptr, false};
  // Someone else is serving this slot, so this is not a lost race: the holder of the lock
  // fills its batch and then wakes a sleeper (below), and a batch that holds the slot's
  // earlier tasks is in every searcher's view. A searcher that stops here goes through the
  // parker's prepare() and a last look before it sleeps, which finds either the batch or the
  // slot again, or is seen by the filler's notify_one (src/README.md, "Steal races").
  // Counting these as lost races made every idle worker of an oversubscribed pool circle here
  // and yield, taking the cores from the producer and from the holder itself.
  if (slot.batching.exchange(true, std::memory_order_acquire)) return {nullptr, false};
  // Under the lock no batch can be filled from this slot, so one that still holds its tasks
  // keeps holding them until taken: those go first.
  for (const auto& other : workers()) {
    if (!other->batch.empty() && other->batch.source() == &slot) {
      slot.batching.store(false, std::memory_order_release);
      return {nullptr, false};
    }
  }
  // w's own batch is empty: find_normal took from it first, and only w fills it.
  task* run[stolen_batch::k_capacity];
  auto [count, retry] = slot.deque.steal_batch(run, stolen_batch::k_capacity);
  if (count > 1) w.batch.fill(&slot, run + 1, count - 1);
  slot.batching.store(false, std::memory_order_release);
  // The run was out of sight between the CAS on the slot and the fill: a worker that looked
  // then saw neither and may have gone to sleep. Making the batch visible is a submission
  // like any other for the parking protocol (src/README.md, "Parking and waking").
  if (count > 1) notify_worker();
  return {count > 0 ? run[0] : nullptr, retry};
}

bool core::has_work() const noexcept {
  if (!injector_.empty()) return true;
  for (const auto& w : workers()) {
    if (!w->deque.empty() || !w->batch.empty()) return true;
  }
  for (std::size_t i = 0, n = slots_.in_use(); i < n; ++i) {
    if (!slots_[i].deque.empty()) return true;
  }
  return false;
}

template <class Done>
bool core::spin(worker&, Done done) noexcept {
  if (cfg_.spin_rounds == 0 || !parker_.try_start_spinning()) return false;
  // The first rounds only pause: the next task of a burst usually comes within them. Later
  // rounds yield the processor instead, so a spinner never holds a core that a runnable
  // thread of the same machine (a submitter, a worker with work) is waiting for: with more
  // threads than cores, a plain spinner would take that core from them for its whole spin.
  bool found = false;
  for (unsigned round = 0; round < cfg_.spin_rounds && !found; ++round) {
    if (round < k_pause_rounds) {
      for (int i = 0; i < 16; ++i) cpu_relax();
    } else {
      sched_yield();
    }
    found = done() || has_work();
  }
  parker_.stop_spinning();
  return found;
}

void core::wake_for_surplus() noexcept {
  // This worker just went from idle to busy. Submissions made while it spun woke nobody, so
  // if more work is queued than the task it took, pass the baton to one sleeper (which does
  // the same in turn): parallelism ramps up one wake-up per task, not one per submission.
  if (has_work()) notify_worker();
}

bool core::crowded(std::uint32_t extra_asleep) const noexcept {
  if (!defer_ || outside_active_.load(std::memory_order_relaxed) == 0) return false;
  return awake_workers(extra_asleep) >= keep_awake_;
}

bool core::retreat(worker& w, bool* timed) noexcept {
  // Cheap tests first: this runs after every task.
  if (!defer_ || max_threads_ <= keep_awake_ ||
      outside_active_.load(std::memory_order_relaxed) == 0) {
    return false;
  }
  const std::uint32_t live = live_.load(std::memory_order_relaxed);
  const std::uint32_t blocked = blocked_.load(std::memory_order_relaxed);
  if (elastic_ && live > min_threads_) return false;
  // Not in a blocking region; more of them awake than keep_awake_ (this one included), as a
  // first look without the lock; then decided under it.
  if (live <= blocked || live - blocked <= parker_.sleepers() + keep_awake_) return false;
  if (!w.deque.empty()) return false;
  return parker_.prepare_if_others_awake(w.index, live - blocked, keep_awake_, timed);
}

std::uint32_t core::awake_workers(std::uint32_t extra_asleep) const noexcept {
  const std::uint32_t idle =
      parker_.sleepers() + extra_asleep + blocked_.load(std::memory_order_relaxed);
  const std::uint32_t live = live_.load(std::memory_order_relaxed);
  return live > idle ? live - idle : 0;
}

bool core::sleep_timed(worker& w) noexcept {
  // Entered listed, holding the timed role, after the protocol's last look. Each period ends
  // with this worker off the list and the role free (park_until); it then either leaves (to
  // the worker loop, which looks for work, takes it or parks again by the usual protocol) or
  // takes the role again for one more period. Deferred work is never left without a timed
  // sleeper: a notifier defers only while one is listed, and every period that ends with
  // work queued either takes it or re-lists a timed sleeper before sleeping again.
  (void)note_progress(w);
  for (;;) {
    const auto deadline = std::chrono::steady_clock::now() + cfg_.defer_period;
    const parker::wake how = parker_.park_until(w.index, deadline);
    if (how != parker::wake::timed_out) return how == parker::wake::searching;
    // Whether an outside thread submitted during the period (and clear it for the next).
    const bool outside = outside_active_.exchange(0, std::memory_order_relaxed) != 0;
    const bool stuck = note_progress(w);
    const bool queued = has_work();
    // Nothing to defer for: no outside thread took a core this period, or too few workers
    // are awake to crowd it.
    if (!outside || awake_workers(1) < keep_awake_) return false;
    // A worker ran one task for the whole period: it may be blocked, and the work queued
    // behind it must not wait for it.
    if (queued && stuck) {
      rescues_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    // One more period. Queued work was seen above and is deferred to this sleeper's next
    // period: no last look (it would take the work). With nothing queued, the usual last look.
    if (!parker_.prepare(w.index, true)) {  // another sleeper took the role meanwhile
      parker_.cancel(w.index);
      return false;
    }
    if (terminate_.load(std::memory_order_seq_cst) || (!queued && has_work())) {
      parker_.cancel(w.index);
      return false;
    }
  }
}

void core::outside_sleeps() noexcept {
  if (outside_active_.load(std::memory_order_relaxed) != 0) {
    outside_active_.store(0, std::memory_order_relaxed);
  }
  // Work may have been deferred while this thread took a core: hand it to a sleeper now.
  if (parker_.timed_listed() && has_work()) parker_.notify_one();
}

void core::execute(worker* w, task* t) noexcept {
  if (discarding_.load(std::memory_order_acquire)) {
    drop(w, t);
    return;
  }
  if (w != nullptr) add_owned32(w->depth, +1);
  const outcome how = t->run(*this);
  if (w != nullptr) add_owned32(w->depth, -1);
  tally(w,
        how == outcome::completed ? &counters::completed
        : how == outcome::failed  ? &counters::failed
                                  : &counters::cancelled,
        1);
}

bool core::help_until(wait_target& until,
                      const std::chrono::steady_clock::time_point* deadline) noexcept {
  worker& w = *tls_worker;
  // As in worker_main: woken by notify_one, this thread counts as a spinner until it has
  // looked once. A helper may leave right after (its target is done), so it gives the count
  // back and, like a worker that found a task, wakes one sleeper if work is queued.
  bool searching = false;
  auto stop_searching = [&] {
    if (searching) {
      searching = false;
      parker_.stop_spinning();
      wake_for_surplus();
    }
  };
  for (;;) {
    if (until.done()) {
      stop_searching();
      return true;
    }
    task* found = find_task(w);
    stop_searching();
    if (found != nullptr) {
      execute(&w, found);
      continue;
    }
    if (deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) return false;
    if (spin(w, [&until] { return until.done(); })) {
      if (!until.done()) wake_for_surplus();
      continue;
    }
    parker_.prepare(w.index);
    // After prepare(): either the waker sees our announcement and wakes the parker, or we see
    // the target done here (arm() and the waker's check pair up; see wait_target).
    if (until.arm()) {
      if (parker_.cancel(w.index)) wake_for_surplus();
      return true;
    }
    if (task* t = find_task(w)) {
      parker_.cancel(w.index);
      until.disarm();
      wake_for_surplus();
      execute(&w, t);
      continue;
    }
    parker::wake how;
    if (deadline == nullptr) {
      how = parker_.park(w.index);
    } else {
      how = parker_.park_until(w.index, *deadline);
    }
    until.disarm();
    if (how == parker::wake::timed_out) return until.done();
    searching = how == parker::wake::searching;
  }
}

}  // namespace spool::detail
