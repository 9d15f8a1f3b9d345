// sleep/sleep.hpp: when idle workers poll, sleep and wake, and when a wake-up is deferred.
// The protocol and the arguments that it loses no wake-up are in sleep/README.md.
//
// State: the parker (parker.hpp: the list of sleepers, the spinners' count, the timed role)
// and the deferral policy: the CPUs the process may use, whether an outside thread submitted
// lately (`outside_active_`), and each worker's progress as the timed sleeper last saw it
// (worker::progress_seen).
//
// Invariants:
//  - A task made visible is either seen by a sleeper's last look (after prepare()), or its
//    notifier sees that sleeper listed, or a spinner counted (parker.hpp; sleep/README.md,
//    "Parking and waking").
//  - While work is queued and no awake worker is going to look at it, a timed sleeper is
//    listed, or the worker that held the role is between its deadline and its decision
//    (sleep/README.md, "Deferred wake-ups").
//  - An idle pool makes no wake-ups: only the timed role sleeps with a deadline of this
//    part's, and only while an outside thread submits to a crowded pool or takes its tasks
//    back (a worker's other deadlines are its keep-alive and a pending timer's).
//
// Boundaries: every part that makes a task visible (submission, fork, a range ticket, a
// stolen batch) calls notify_worker() afterwards; an outside thread about to sleep in spool
// calls outside_sleeps(). Both are the notifier's half of the pairing with the parker. Whoever
// completes something a helping worker may sleep on (a future, a group, a fork's half) calls
// wake_all(). The sleeper's half is nap() (and retreat()), the one parking protocol, which the
// worker loop and help_until both call; the parker itself is not handed out. What the timed
// sleeper reads of other workers' progress it asks quiescence/ for (finished_by, running).
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "queues/queues.hpp"
#include "quiescence/quiescence.hpp"
#include "sleep/parker.hpp"
#include "spool/spool.hpp"
#include "sync/cpu_relax.hpp"
#include "worker/worker.hpp"

namespace spool::detail {

class sizer;
struct core_testing;

class sleep_control {
 public:
  sleep_control(const config& cfg, unsigned min_threads, unsigned max_threads,
                const roster& workers, const queues& work, const sizer& threads,
                const quiescence& counts);
  sleep_control(const sleep_control&) = delete;
  sleep_control& operator=(const sleep_control&) = delete;

  // ---- Notifiers ----

  // After making work visible: wakes one sleeper, unless a spinner will find the work, nobody
  // sleeps, or a timed sleeper watches the deferred work and either the pool is crowded or
  // `taken_back`: the submitter is an outside thread that takes its tasks back
  // (producer_slot::takes_back) and is about to run this one itself (sleep/README.md,
  // "Deferred wake-ups").
  void notify_worker(bool taken_back = false) noexcept {
    parker_.notify_one([this, taken_back] { return (taken_back && defer_) || crowded(0); });
  }
  // A thread outside the pool submitted: it holds a core while it goes on submitting.
  // `takes_back`: it takes its tasks back (as for notify_worker), which keeps the timed role
  // wanted when no worker is awake.
  void note_outside(bool takes_back = false) noexcept {
    const std::uint32_t seen = takes_back ? k_outside_takes_back : k_outside;
    if (outside_active_.load(std::memory_order_relaxed) < seen) {
      outside_active_.store(seen, std::memory_order_relaxed);
    }
  }
  // A thread outside the pool is about to sleep (a future, a group, wait_idle, a full queue):
  // it no longer takes a core, so work deferred on its account is handed to a sleeper now,
  // not at the timed sleeper's next period.
  void outside_sleeps() noexcept;
  // A worker found work after being idle. Submissions made while it spun woke nobody, so if
  // more is queued than the task it took, it passes the baton to one sleeper (which does the
  // same in turn): parallelism ramps up one wake-up per task, not one per submission.
  void wake_for_surplus() noexcept {
    if (work_.has_work()) notify_worker();
  }
  // Wakes every sleeper: shutdown, and a completion a helping worker sleeps on (the waker's
  // half of wait_target's pairing).
  void wake_all() noexcept { parker_.notify_all(); }

  // ---- Idle workers ----

  // Polls for work (or for `done`) a while before the caller parks, as one of at most
  // max_spinners. True if worth another look.
  template <class Done>
  bool spin(Done done) noexcept {
    return spin_rounds(done, spin_rounds_);
  }
  // An idle worker's spin, shortened for sparse work. `short_gap` (kept by the worker): its
  // last idle spell, from going idle to finding work, lasted at most k_stream_gap, about what
  // a whole spin covers; `after_one`: it ran at most one task since it last went idle. A
  // worker that ran a single task after a long spell is serving sparse work (timers firing a
  // few hundred times a second, a trickle of requests): a whole spin of sched_yield() calls
  // would cost CPU and catch nothing, so it only pauses (the first k_pause_rounds) before it
  // parks. A steady stream of single tasks (a client that submits one task at a time and
  // waits for it) has short spells, and so does a worker that was woken soon after it
  // parked: those keep the whole spin, which catches the next task without a sleeping
  // hand-off; so does a worker that runs dry after a stretch of tasks.
  bool idle_spin(bool short_gap, bool after_one) noexcept {
    const unsigned rounds =
        short_gap || !after_one ? spin_rounds_ : std::min(spin_rounds_, k_pause_rounds);
    return spin_rounds([] { return false; }, rounds);
  }
  template <class Done>
  bool spin_rounds(Done done, unsigned rounds) noexcept {
    if (rounds == 0 || !parker_.try_start_spinning()) return false;
    // The first rounds only pause: the next task of a burst usually comes within them. Later
    // rounds yield the processor instead, so a spinner never holds a core that a runnable
    // thread of the same machine (a submitter, a worker with work) is waiting for: with more
    // threads than cores, a plain spinner would take that core from them for its whole spin.
    // A pause round looks every k_pauses_per_look pauses (about 0.1 us here): a client that
    // waits for its task by polling only briefly (std::atomic::wait polls about a microsecond
    // before it sleeps) gets its answer within that poll only if the task is caught at once.
    bool found = false;
    for (unsigned round = 0; round < rounds && !found; ++round) {
      if (round < k_pause_rounds) {
        for (int look = 0; look < 16 / k_pauses_per_look && !found; ++look) {
          for (int i = 0; i < k_pauses_per_look; ++i) cpu_relax();
          found = done() || work_.has_work();
        }
      } else {
        sched_yield();
        found = done() || work_.has_work();
      }
    }
    parker_.stop_spinning();
    return found;
  }
  // A worker about to make work visible that it looks for next (a timer watcher firing what
  // is due) counts as a spinner until searched(), so that the work wakes nobody else. Sets
  // *searching, which must be clear.
  void search_own(bool& searching) noexcept {
    parker_.start_searching();
    searching = true;
  }
  // A worker woken by notify_one counts as a spinner until it has looked for work once
  // (parker::wake::searching); after that look it stops, as a spinner does. Clears *searching.
  void searched(bool& searching) noexcept {
    if (searching) {
      searching = false;
      parker_.stop_spinning();
    }
  }
  // Whether w, about to park, should ask for the timed role: the pool would be crowded
  // without it, or an outside thread that takes its tasks back submitted lately (its
  // submissions defer to the role); and w is not one that retires when idle (those park with
  // their own deadline).
  bool wants_timed_role(bool may_retire) const noexcept {
    return !may_retire && (crowded(1) || owner_takes_back());
  }

  // ---- The parking protocol (sleep/README.md, "Parking and waking") ----

  // How a nap ended.
  enum class nap_end : unsigned char {
    declined,          // retreat() only: the worker stayed awake, nothing was announced
    withdrawn,         // the last look said not to sleep; the announcement is withdrawn
    withdrawn_chosen,  // as withdrawn, but a notify_one had chosen this worker: the spinner's
                       // count it held is given back, and the caller must take the work it
                       // found or make sure someone will (wake_for_surplus)
    woken,             // woken, not counted as a spinner (notify_all, or the timed role ended)
    searching,         // chosen by notify_one: counts as a spinner until searched()
    timed_out,         // the deadline passed; w is no longer listed
  };
  // How to sleep: ask for the timed role (then without a deadline: the role brings its own),
  // be listed last (an isolated waiter), and sleep until woken or until *deadline (read only
  // after the last look, which may set it).
  struct nap_plan {
    bool want_timed = false;
    bool wake_last = false;
    const std::chrono::steady_clock::time_point* deadline = nullptr;
  };
  // The one way a worker sleeps, for the worker loop and help_until alike: announce (the
  // parker's prepare: a seq_cst read-modify-write, then heavy_barrier()), then last_look(),
  // then, unless it returned true, park; a worker leaves the list when a notifier, the
  // deadline or the withdrawal takes it off. last_look runs after the announcement, so any
  // work a notifier made visible without seeing this worker listed is found there (the Dekker
  // pairing with notify_one). Inline: it is the idle loop's, once per sleep.
  template <class LastLook>
  nap_end nap(worker& w, const nap_plan& plan, LastLook last_look) noexcept {
    const bool timed = parker_.prepare(w.index, plan.want_timed, plan.wake_last);
    if (last_look()) return withdraw(w);
    return sleep_listed(w, timed, plan.deadline);
  }
  // After may_retreat(): in a crowded pool with more workers awake than it needs, w lists
  // itself as a sleeper although work may be queued (retreat_listed: no last look for work,
  // which it leaves to the others); after_listing() then runs as nap's last look (it sees
  // terminate) and the worker sleeps, holding the timed role if it got it. `declined`: w
  // stays awake, and after_listing did not run.
  template <class AfterListing>
  nap_end retreat(worker& w, AfterListing after_listing) noexcept {
    bool timed = false;
    if (!retreat_listed(w, &timed)) return nap_end::declined;
    if (after_listing()) return withdraw(w);
    return sleep_listed(w, timed, nullptr);
  }
  // After a task: whether a worker may have to retreat (deferral can make workers retreat, and
  // an outside thread submitted lately). Two loads: this runs after every task.
  bool may_retreat() const noexcept {
    return retreats_ && outside_active_.load(std::memory_order_relaxed) != 0;
  }

 private:
  friend struct core_testing;

  // Takes listed w off the list (nap's withdrawal).
  nap_end withdraw(worker& w) noexcept {
    return parker_.cancel(w.index) ? nap_end::withdrawn_chosen : nap_end::withdrawn;
  }
  // Listed w sleeps: period by period while it holds the timed role (sleep_timed), else until
  // woken or the deadline.
  nap_end sleep_listed(worker& w, bool timed,
                       const std::chrono::steady_clock::time_point* deadline) noexcept {
    if (timed) return sleep_timed(w) ? nap_end::searching : nap_end::woken;
    const parker::wake how =
        deadline == nullptr ? parker_.park(w.index) : parker_.park_until(w.index, *deadline);
    return how == parker::wake::searching   ? nap_end::searching
           : how == parker::wake::timed_out ? nap_end::timed_out
                                            : nap_end::woken;
  }
  // retreat()'s announcement: lists w (prepare_if_others_awake) if the pool is crowded and w
  // has nothing of its own queued. False: nothing was done.
  bool retreat_listed(worker& w, bool* timed) noexcept;
  // Parks w, which holds the timed role, period after period while it decides to keep
  // deferring. Returns whether a notifier chose it (parker::wake::searching).
  bool sleep_timed(worker& w) noexcept;

 public:
  // Rounds of spin() that only pause (16 pauses each) before later rounds yield (a few
  // microseconds), and the pauses between two looks in those rounds. A producer polling a
  // full bounded queue for room (core::poll_for_room) uses the same.
  static constexpr unsigned k_pause_rounds = 8;
  static constexpr int k_pauses_per_look = 4;

  // The longest idle spell that counts as part of a stream (idle_spin): about the length of a
  // whole spin of the default spin_rounds on an otherwise idle machine. A longer spell was
  // not caught by spinning anyway.
  static constexpr std::chrono::microseconds k_stream_gap{50};

 private:
  // Whether waking one more worker would crowd the CPUs: deferral is on, an outside thread
  // submitted lately, and the awake workers (not asleep, not in a blocking region, counting
  // extra_asleep more as asleep) number keep_awake_ already.
  bool crowded(std::uint32_t extra_asleep) const noexcept;
  // Live workers neither asleep in the parker (nor extra_asleep more) nor in a blocking region.
  std::uint32_t awake_workers(std::uint32_t extra_asleep) const noexcept;
  // For the timed sleeper: notes each worker's finished count, and says whether a worker
  // other than `self` was running a task throughout since the last note without finishing
  // one (a task that blocks, or runs long).
  bool note_progress(const worker& self) noexcept;

  const unsigned spin_rounds_;
  const std::chrono::microseconds defer_period_;
  const roster& workers_;
  const queues& work_;
  const sizer& threads_;
  const quiescence& counts_;
  parker parker_;
  // The CPUs this process may run on (sched_getaffinity, at construction).
  const std::uint32_t cpus_;
  // Awake workers that, with one outside thread, fill the CPUs: cpus_ - 1, but at least one
  // (on one CPU, deferring to nobody would leave every task to the timed sleeper's period).
  const std::uint32_t keep_awake_;
  // Deferral is on: defer_period > 0 and no more threads than CPUs. A pool given more threads
  // than CPUs was sized for tasks that block; keeping its workers asleep would undo that.
  const bool defer_;
  // Deferral is on and there are more workers than keep_awake_: some may retreat.
  const bool retreats_;
  // Whether an outside thread submitted since the timed sleeper's last period: 0 none,
  // k_outside, or k_outside_takes_back if one that takes its tasks back did (note_outside).
  static constexpr std::uint32_t k_outside = 1;
  static constexpr std::uint32_t k_outside_takes_back = 2;
  bool owner_takes_back() const noexcept {
    return defer_ && outside_active_.load(std::memory_order_relaxed) == k_outside_takes_back;
  }
  alignas(64) std::atomic<std::uint32_t> outside_active_{0};
  std::atomic<std::uint64_t> rescues_{0};
};

}  // namespace spool::detail
