// worker/loop.cpp: what a worker thread does: find a task (queues/), run it, and when there is
// none, spin and then sleep (sleep/), retiring when idle long enough (elastic/); every worker
// going idle tells quiescence/. help_until() is the same loop run by a worker that waits on a
// future, a group or a fork's half.
//
// The parking protocol (sleep/README.md) is sleep_control::nap, called from rest() and from
// help_until() with their own last looks: a worker that found nothing announces itself, looks
// once more, and only then sleeps. A worker woken by notify_one
// counts as a spinner until it has looked once (`searching`); it then stops, as a spinner
// does, and either takes what it found (and take() passes the baton on) or looks again before
// parking.
//
// Isolation (spool::isolate): the rules, and why an isolated wait adds no deadlock, are in
// isolation.hpp; run_task enters the task's region and help_until asks in_region().
#include <sys/prctl.h>

#include <cstdio>

#include "core.hpp"
#include "worker/isolation.hpp"

namespace spool::detail {
namespace {

// initial-exec: read on every submission (src/README.md, "Thread-local storage").
[[gnu::tls_model("initial-exec")]] thread_local worker* tls_worker = nullptr;
// The pool whose task a thread outside it runs now (execute with no worker), for this_pool().
// initial-exec: set and reset around every task an outside waiter takes back.
[[gnu::tls_model("initial-exec")]] thread_local core* tls_outside_task = nullptr;

}  // namespace

worker* current_worker() noexcept { return tls_worker; }

core* core::running_outside() noexcept { return tls_outside_task; }

worker* blocking_begin() noexcept {
  worker* w = tls_worker;
  if (w != nullptr) w->owner.enter_blocking(*w);
  return w;
}

void blocking_end() noexcept {
  if (worker* w = tls_worker) w->owner.leave_blocking(*w);
}

void core::run_worker(worker& w) noexcept {
  tls_worker = &w;
  name_this_thread(cfg_.name + "-" + std::to_string(w.index));
  threads_.thread_began(w);  // pins the thread if config::affinity says so
  // A worker may park until a timer's deadline (rest(): the timer watch): sleep to the
  // deadline itself, as the timer thread does; the default 50 us of slack would be added to
  // the timer's lateness.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  if (cfg_.on_worker_start)
    threads_.call_worker_hook(cfg_.on_worker_start, w.index, "on_worker_start");
  bool searching = false;
  rest_end end = rest_end::looked;
  while (end == rest_end::looked) {
    work_item* t = queues_.find_task(w);
    sleep_.searched(searching);
    if (t != nullptr) {
      take(w, t);
      if (sleep_.may_retreat()) retreat(w, searching);
      continue;
    }
    if (!threads_.idle(w)) {
      threads_.went_idle(w);
      w.idle_since = worker::clock::now();
    }
    const std::uint64_t finished = idle_.finished_by(w);
    const bool after_one = finished - w.finished_at_idle <= 1;
    w.finished_at_idle = finished;
    // A search that met a producer slot served by another worker parks without spinning.
    // One producer feeding many workers is served from one batch at a time, and a spinner
    // would come straight back to that batch and slot: their lines, which the producer and
    // the batch's takers write, then move between every spinner's core and theirs, and the
    // producer slows down with each extra spinner. Parking leaves nothing behind: the last
    // look before the park still takes from the batch or the slot, and the worker that fills
    // the next batch wakes a sleeper (queues/README.md, "Steal races").
    if (!w.met_served_slot && sleep_.idle_spin(w.short_gap, after_one)) continue;
    end = rest(w, searching);
  }
  unwatch_timers(w);
  threads_.thread_ends(w, end == rest_end::retired);
  // No longer a worker: what the hook submits goes in as from outside (and is refused once
  // the pool shuts down, instead of landing in a deque nobody will look at again).
  tls_worker = nullptr;
  if (cfg_.on_worker_stop)
    threads_.call_worker_hook(cfg_.on_worker_stop, w.index, "on_worker_stop");
}

void core::found_work(worker& w) noexcept {
  // How long the idle spell lasted decides the next spin (sleep_control::idle_spin).
  w.short_gap = worker::clock::now() - w.idle_since <= sleep_control::k_stream_gap;
  threads_.went_busy(w);
  sleep_.wake_for_surplus();
}

void core::unwatch_timers(worker& w) noexcept {
  if (w.watches_timers) {
    timers_.unwatch(w.index);
    w.watches_timers = false;
  }
}

void core::retreat(worker& w, bool& searching) noexcept {
  unwatch_timers(w);  // it sleeps without the watched deadline
  // A crowded pool's extra worker leaves the queued work to the others and sleeps; work it
  // leaves is deferred work, which a timed sleeper watches (sleep_control::retreat).
  const auto end = sleep_.retreat(w, [&] {
    threads_.went_idle(w);
    idle_.notify();
    return threads_.terminating();
  });
  searching = end == sleep_control::nap_end::searching;  // false before: run_worker searched()
}

core::rest_end core::rest(worker& w, bool& searching) noexcept {
  // Above min_threads a worker sleeps at most until it has been idle for keep_alive, then
  // retires. At or below it sleeps without a timeout (an idle pool makes no wake-ups), or,
  // holding the timed role while the pool is crowded, period by period (sleep_timed).
  using nap_end = sleep_control::nap_end;
  if (threads_.over_max()) {
    unwatch_timers(w);
    // resize() lowered max_threads below the live count: an idle worker retires at once. As
    // after keep_alive below, it is not among the sleepers, so it looks once more first (a
    // submission that counted on it as a spinner is seen here). It tells wait_idle() as every
    // worker going idle does.
    idle_.notify();
    if (work_item* t = queues_.find_task(w)) {
      take(w, t);
      return rest_end::looked;
    }
    if (threads_.try_retire(w, scale_event::cause::resize)) return rest_end::retired;
  }
  const bool may_retire = threads_.may_retire();
  const bool want_timed = sleep_.wants_timed_role(may_retire);
  // A worker that would sleep without a deadline watches the earliest timer instead: it
  // parks until that deadline and fires what is due itself, so a timer wakes one thread, not
  // the timer thread and then a worker (timers/README.md, "A worker watches the earliest
  // deadline"). It is listed last, so that submissions wake the other sleepers first.
  const bool may_watch = !may_retire && !want_timed && timers_.maybe_pending();
  if (!may_watch) unwatch_timers(w);
  // Set by the last look, read by the park: the retirement deadline or the watched one.
  std::chrono::steady_clock::time_point park_until{};
  const sleep_control::nap_plan plan{.want_timed = want_timed,
                                     .wake_last = may_watch,
                                     .deadline = may_retire || may_watch ? &park_until : nullptr};
  bool terminate = false;
  work_item* found = nullptr;
  timers::watch watch = timers::watch::none;
  const nap_end end = sleep_.nap(w, plan, [&] {
    // Every worker passes here before it sleeps, so the last one to go idle tells wait_idle().
    idle_.notify();
    terminate = threads_.terminating();
    if (terminate || (found = queues_.find_task(w)) != nullptr) return true;
    // After the announcement, so a resize() that moves the deadline either is seen here or
    // finds this worker listed and wakes it.
    if (may_retire) park_until = threads_.retire_at(w);
    if (may_watch) {
      // After the announcement too: a timer that becomes the earliest after this is served
      // by the timer thread (it comes before the watched deadline).
      watch = timers_.watch_from(w.index, &park_until);
      // `due` may come to the watcher too (it keeps the watch while it fires).
      w.watches_timers = watch != timers::watch::none;
      if (watch == timers::watch::due) return true;
      if (watch == timers::watch::none) park_until = std::chrono::steady_clock::time_point::max();
    }
    return false;
  });
  if (terminate) {
    unwatch_timers(w);
    return rest_end::terminate;
  }
  if (found != nullptr) {
    take(w, found);  // a spinner's count it held was given back; take() passes it on
    return rest_end::looked;
  }
  if (watch == timers::watch::due ||
      (watch == timers::watch::watching && end == nap_end::timed_out)) {
    // It fires what is due and takes it next, counted as a spinner meanwhile, so that the
    // timers' tasks wake nobody else. A watcher keeps the watch while it runs them.
    sleep_.search_own(searching);
    timers_.fire_watched(w.index);
    return rest_end::looked;
  }
  if (end != nap_end::timed_out) {
    // Woken for other work, a watcher keeps the watch, awake: it serves the due nodes when
    // it parks again, and the thread's backstop covers a long stay. Handing the watch back
    // would wake the thread now and again when the watch is taken anew: twice per
    // submission in a pool whose one worker watches.
    if (w.watches_timers) timers_.watcher_woke(w.index);
    searching = end == nap_end::searching;
    return rest_end::looked;
  }
  // Idle for keep_alive and no longer among the sleepers: look once more (a waker that saw
  // us in `sleepers` before park_until() took us out may have woken nobody), then retire.
  if (work_item* t = queues_.find_task(w)) {
    take(w, t);
    return rest_end::looked;
  }
  return threads_.try_retire(w) ? rest_end::retired : rest_end::looked;
}

[[gnu::always_inline]] inline void core::tally_outcome(worker* w, outcome how) noexcept {
  idle_.tally(w,
              how == outcome::completed ? &counters::completed
              : how == outcome::failed  ? &counters::failed
                                        : &counters::cancelled,
              1);
}

// Inline: it is the body of execute()'s fast path, which every task takes.
[[gnu::always_inline]] inline outcome core::run_task(worker* w, work_item* t) noexcept {
  if (w == nullptr) {
    core* const outer = tls_outside_task;
    tls_outside_task = this;
    const outcome how = t->run(*this);
    tls_outside_task = outer;
    return how;
  }
  // The task runs in the region it was submitted in, and so do the tasks it submits and its
  // waits; the worker's own region comes back when it returns (the task may be freed by then).
  const region_scope region(*w, *t);
  quiescence::task_begins(*w);
  const outcome how = t->run(*this);
  quiescence::task_ends(*w);
  return how;
}

void core::execute(worker* w, work_item* t) noexcept {
  if (gate_.bits() != 0) {
    execute_gated(w, t);
    return;
  }
  tally_outcome(w, run_task(w, t));
}

namespace {

// A task hook's call: an exception is reported and ignored, as a worker hook's.
template <class Hook, class... A>
void call_task_hook(const Hook& hook, const char* which, const A&... args) noexcept {
  if (!hook) return;
  try {
    hook(args...);
  } catch (...) {
    std::fprintf(stderr, "spool: the %s hook threw; ignored\n", which);
  }
}

task_end end_of(outcome how) noexcept {
  return how == outcome::completed ? task_end::completed
         : how == outcome::failed  ? task_end::failed
                                   : task_end::cancelled;
}

}  // namespace

void core::execute_gated(worker* w, work_item* t) noexcept {
  if (!pass_gate(w, t)) return;
  if (!gate_.traced()) {
    tally_outcome(w, run_task(w, t));
    return;
  }
  // The name first: the task may be freed by the time run() returns.
  const task_info info{t->name(), w != nullptr ? static_cast<int>(w->index) : -1};
  call_task_hook(cfg_.on_task_start, "on_task_start", info);
  const outcome how = run_task(w, t);
  call_task_hook(cfg_.on_task_finish, "on_task_finish", info, end_of(how));
  tally_outcome(w, how);
}

bool core::help_until(wait_target& until,
                      const std::chrono::steady_clock::time_point* deadline) noexcept {
  using nap_end = sleep_control::nap_end;
  worker& w = *tls_worker;
  // Inside an isolation region the wait runs only that region's tasks (find_for_wait). Such a
  // waiter lists itself to be woken last by submissions (nap_plan::wake_last): they are meant
  // for workers that may take any task. Chosen all the same and finding nothing of its region,
  // it passes the wake-up on (stop_searching's wake_for_surplus), so no task is left behind.
  const bool isolated = in_region(w);
  // As in run_worker: woken by notify_one, this thread counts as a spinner until it has
  // looked once. A helper may leave right after (its target is done), so it gives the count
  // back and, like a worker that found a task, wakes one sleeper if work is queued.
  bool searching = false;
  auto stop_searching = [&] {
    if (searching) {
      sleep_.searched(searching);
      sleep_.wake_for_surplus();
    }
  };
  for (;;) {
    if (until.done()) {
      stop_searching();
      return true;
    }
    work_item* found = find_for_wait(w, until.direct());
    stop_searching();
    if (found != nullptr) {
      execute(&w, found);
      continue;
    }
    if (deadline != nullptr && std::chrono::steady_clock::now() >= *deadline) return false;
    // An isolated waiter does not spin: the spin ends as soon as any task is queued, and most
    // queued tasks are not its region's, so it would circle here instead of parking.
    if (!isolated && sleep_.spin([&until] { return until.done(); })) {
      if (!until.done()) sleep_.wake_for_surplus();
      continue;
    }
    // The parking protocol (sleep_control::nap). The last look: either the waker sees our
    // announcement and wakes us, or we see the target done here (arm() and the waker's check
    // pair up; see wait_target), or a task we may run.
    bool target_done = false;
    work_item* last = nullptr;
    const sleep_control::nap_plan plan{.wake_last = isolated, .deadline = deadline};
    const nap_end end = sleep_.nap(w, plan, [&] {
      target_done = until.arm();
      return target_done ||
             (last = find_for_wait(w, until.direct(), /*last_look=*/true)) != nullptr;
    });
    if (target_done) {
      if (end == nap_end::withdrawn_chosen) sleep_.wake_for_surplus();
      return true;
    }
    until.disarm();
    if (last != nullptr) {
      sleep_.wake_for_surplus();
      execute(&w, last);
      continue;
    }
    if (end == nap_end::timed_out) return until.done();
    searching = end == nap_end::searching;
  }
}

}  // namespace spool::detail
