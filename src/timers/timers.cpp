// timers/timers.cpp: the timer queue and its thread, and the handle timers' state machine
// (detail::timer_entry). The argument is in README.md beside this file.
#include "timers/timers.hpp"

#include <sys/prctl.h>

#include <chrono>
#include <system_error>

#include "core.hpp"
#include "elastic/thread_slot.hpp"
#include "lifetime/lifetime.hpp"

namespace spool::detail {

timers::~timers() {
  if (thread_.joinable()) {  // stop() was skipped (a constructor failed after the first timer)
    {
      std::lock_guard lock(mu_);
      exit_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
}

std::error_code timers::schedule(timer_node& n) noexcept {
  std::lock_guard lock(mu_);
  return schedule_locked(n);
}

std::error_code timers::schedule_locked(timer_node& n) noexcept {
  if (closed_) return errc::shut_down;
  try {
    // Room first, so that push_back below cannot throw; grown geometrically (reserving one
    // more each time would copy the whole heap on every insertion).
    if (heap_.size() == heap_.capacity()) {
      heap_.reserve(std::max<std::size_t>(64, 2 * heap_.size()));
    }
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  } catch (const std::system_error&) {
    return errc::system;
  } catch (...) {
    return errc::no_memory;
  }
  n.order = next_order_++;
  heap_.push_back(&n);
  n.heap_slot = heap_.size() - 1;
  sift_up(n.heap_slot);
  size_changed_locked();
  // The thread sleeps until the old earliest deadline; only a new earliest changes that, and
  // not one that a parked watcher reaches first (it fires every node due when it wakes).
  if (heap_.front() == &n && !(watcher_parked_ && n.deadline >= watched_at_)) {
    notify_thread_locked();
  }
  return {};
}

bool timers::remove(timer_node& n) noexcept {
  std::lock_guard lock(mu_);
  return remove_locked(n);
}

bool timers::remove_locked(timer_node& n) noexcept {
  if (n.heap_slot == timer_node::k_not_queued) return false;
  const bool was_first = n.heap_slot == 0;
  take_locked(n.heap_slot);
  // A thread serving the heap would wake at the removed deadline for nothing: let it sleep to
  // the next one (or for good), so that a pool whose timers were all cancelled makes no
  // wake-ups. A thread that backs a watcher up wakes past the removed deadline at most once,
  // and then waits for the next: not waking it now spares a wake-up per removal when timers
  // are cancelled one after another (a timeout per request). The watcher likewise wakes at
  // the removed deadline once and parks again until the next.
  if (was_first && thread_wait_ == thread_wait::serving) notify_thread_locked();
  return true;
}

timer_node* timers::take_locked(std::size_t i) noexcept {
  timer_node* n = heap_[i];
  timer_node* last = heap_.back();
  heap_.pop_back();
  size_changed_locked();
  n->heap_slot = timer_node::k_not_queued;
  if (last != n) {
    place(i, last);
    sift_down(i);
    sift_up(last->heap_slot);
  }
  return n;
}

void timers::sift_up(std::size_t i) noexcept {
  timer_node* n = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!earlier(n, heap_[parent])) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, n);
}

void timers::sift_down(std::size_t i) noexcept {
  timer_node* n = heap_[i];
  const std::size_t size = heap_.size();
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= size) break;
    if (child + 1 < size && earlier(heap_[child + 1], heap_[child])) ++child;
    if (!earlier(heap_[child], n)) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, n);
}

void timers::run() noexcept {
  name_this_thread(name_ + "-tmr");
  // Sleep to the deadline itself: the default 50 us of slack would be added to every timer's
  // lateness. This thread makes one wake-up per due deadline, so the tighter wake costs
  // nothing measurable.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  std::unique_lock lock(mu_);
  for (;;) {
    if (exit_) return;
    if (heap_.empty()) {
      if (firing_ == 0) emptied_.notify_all();
      thread_wait_ = thread_wait::untimed;
      wake_.wait(lock);
      continue;
    }
    auto deadline = heap_.front()->deadline;
    if (watcher_ != k_no_watcher && !(watcher_parked_ && deadline < watched_at_)) {
      // A worker watches (README.md, "A worker watches the earliest deadline"): it fires the
      // earliest when it wakes, or, busy, when it parks again. The thread only backs it up,
      // k_backstop late: a watcher kept by a long task, or not scheduled, loses the watch.
      const auto latest = timer_node::clock::time_point::max() - k_backstop;
      deadline = deadline < latest ? deadline + k_backstop : timer_node::clock::time_point::max();
      const auto now = timer_node::clock::now();
      if (now < deadline) {
        thread_wait_ = thread_wait::backstop;
        wake_.wait_until(lock, deadline);
        continue;
      }
      // The watcher is late: the thread serves every deadline for a pause, longer each time
      // a takeover follows the last pause closely (timers.hpp, k_pause_min).
      watch_pause_ = next_pause(watch_pause_, watch_resumes_, now);
      watch_resumes_ = now + watch_pause_;
      drop_watch_locked();
    }
    if (timer_node::clock::now() < deadline) {
      thread_wait_ = thread_wait::serving;
      wake_.wait_until(lock, deadline);
      continue;
    }
    thread_wait_ = thread_wait::running;
    timer_node* due = take_locked(0);
    lock.unlock();
    due->fire(owner_);
    lock.lock();
  }
}

timers::watch timers::watch_from(std::uint32_t seat,
                                 std::chrono::steady_clock::time_point* deadline) noexcept {
  std::lock_guard lock(mu_);
  if (heap_.empty() || closed_) {
    // Nothing to watch (or a shutdown serves the rest on the thread): an old watch ends.
    if (watcher_ == seat) drop_watch_locked();
    return watch::none;
  }
  const auto earliest = heap_.front()->deadline;
  const auto now = timer_node::clock::now();
  if (now >= earliest) return watch::due;
  if (watcher_ != seat) {
    // Another worker watches, or the thread took the watch back and pauses it.
    if (watcher_ != k_no_watcher || now < watch_resumes_) return watch::none;
    watcher_ = seat;
    // A thread asleep until the same deadline would wake beside the watcher: it backs the
    // watcher up instead.
    if (thread_wait_ == thread_wait::serving) notify_thread_locked();
  }
  watcher_parked_ = true;
  watched_at_ = earliest;
  *deadline = earliest;
  return watch::watching;
}

void timers::fire_watched(std::uint32_t seat) noexcept {
  std::unique_lock lock(mu_);
  if (watcher_ == seat) watcher_parked_ = false;  // busy: it keeps the watch
  // A few at a time, without allocating: nodes due together are rare beyond the first.
  constexpr std::size_t k_batch = 8;
  timer_node* due[k_batch];
  for (;;) {
    const auto now = timer_node::clock::now();
    std::size_t n = 0;
    while (n < k_batch && !heap_.empty() && heap_.front()->deadline <= now)
      due[n++] = take_locked(0);
    // The thread waits without a timeout only with the heap empty, and a watcher's firing
    // only empties it: the thread's wait needs no change.
    if (n == 0) return;
    ++firing_;  // a draining stop() waits for these to be fired, not only taken
    lock.unlock();
    for (std::size_t i = 0; i < n; ++i) due[i]->fire(owner_);
    lock.lock();
    if (--firing_ == 0 && heap_.empty()) emptied_.notify_all();
  }
}

void timers::watcher_woke(std::uint32_t seat) noexcept {
  std::lock_guard lock(mu_);
  // The thread already waits as the backstop of the earliest node: nothing to tell it.
  if (watcher_ == seat) watcher_parked_ = false;
}

void timers::unwatch(std::uint32_t seat) noexcept {
  std::lock_guard lock(mu_);
  if (watcher_ != seat) return;
  drop_watch_locked();
  if (!heap_.empty() && thread_wait_ != thread_wait::serving) notify_thread_locked();
}

std::size_t timers::stop(std::chrono::steady_clock::time_point cutoff) noexcept {
  std::vector<timer_node*> dropped;
  std::unique_lock lock(mu_);
  closed_ = true;
  drop_watch_locked();  // the thread fires what a drain keeps
  bool room = true;
  try {
    dropped.reserve(heap_.size());
  } catch (...) {
    room = false;
  }
  if (room) {
    for (timer_node* n : heap_) {
      if (n->periodic() || n->deadline > cutoff) dropped.push_back(n);  // reserved: no throw
    }
    for (timer_node* n : dropped) take_locked(n->heap_slot);
  } else {
    // No memory for the list: every node is dropped (the heap itself becomes the list), as a
    // shutdown must not wait for timers beyond its cutoff.
    dropped.swap(heap_);
    for (timer_node* n : dropped) n->heap_slot = timer_node::k_not_queued;
    size_changed_locked();
  }
  wake_.notify_one();  // its earliest deadline may have gone
  lock.unlock();
  for (timer_node* n : dropped) n->discard();
  lock.lock();
  // The ones left are due by the cutoff: they fire into a pool not yet closed.
  if (thread_.joinable()) emptied_.wait(lock, [this] { return heap_.empty() && firing_ == 0; });
  exit_ = true;
  lock.unlock();
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  return dropped.size();
}

std::size_t timers::pending() const noexcept {
  std::lock_guard lock(mu_);
  return heap_.size();
}

bool timers::thread_started() const noexcept {
  std::lock_guard lock(mu_);
  return thread_.joinable();
}

// ---- The library's side of detail/timer.hpp ----

std::error_code timer_schedule(core& owner, timer_node& n) noexcept {
  return owner.timer_queue().schedule(n);
}

std::error_code timer_schedule(pool_ref owner, timer_node& n) noexcept {
  const worker* w = current_worker();
  if (w != nullptr && &w->owner == owner.owner) return owner.owner->timer_queue().schedule(n);
  pin held(owner);
  if (!held) return errc::shut_down;
  return owner.owner->timer_queue().schedule(n);
}

void timer_cancel(pool_ref owner, timer_entry& e) noexcept {
  const worker* w = current_worker();
  // The same call in both branches; only the second holds a pin while it makes it.
  if (w != nullptr && &w->owner == owner.owner) {  // NOLINT(bugprone-branch-clone)
    e.cancel();
  } else if (pin held(owner); held) {
    e.cancel();
  }
}

bool timer_remove(pool_ref owner, timer_node& n) noexcept {
  const worker* w = current_worker();
  if (w != nullptr && &w->owner == owner.owner) return owner.owner->timer_queue().remove(n);
  pin held(owner);
  return held && owner.owner->timer_queue().remove(n);
}

std::error_code submit_due(core& owner, work_item* t, priority p) noexcept {
  return owner.submit_due(t, p);
}

// ---- timer_entry: the handle timers' state machine (README.md, "A timer's life") ----

namespace {

// The task that carries one run of a timer_entry through the pool's queues.
class timer_run final : public work_item {
 public:
  explicit timer_run(timer_entry& e) noexcept : entry_(e) {}
  outcome run(core&) noexcept override {
    timer_entry& e = entry_;
    delete this;
    return e.run();
  }
  void cancel() noexcept override {
    timer_entry& e = entry_;
    delete this;
    e.dropped();
  }
  void destroy() noexcept override { delete this; }  // submit_due keeps it on refusal
  const char* name() const noexcept override { return entry_.name(); }

 private:
  timer_entry& entry_;
};

}  // namespace

void timer_entry::fire(core& owner) noexcept {
  std::uint32_t s = scheduled;
  if (!state_.compare_exchange_strong(s, submitted, std::memory_order_acq_rel)) {
    // cancel() came between the heap and here; what it left to us is the ending.
    end(ending::stopped, {});
    release();
    return;
  }
  auto* t = new (std::nothrow) timer_run(*this);
  std::error_code why = t == nullptr ? std::error_code(errc::no_memory) : std::error_code{};
  if (!why) why = owner.submit_due(t, prio);
  if (!why) return;
  if (t != nullptr) t->destroy();
  // Refused (the pool is closed): reported unless cancel() got there first.
  s = submitted;
  const bool ours = state_.compare_exchange_strong(s, finished, std::memory_order_acq_rel);
  end(ours ? ending::refused : ending::stopped, why);
  release();
}

void timer_entry::discard() noexcept {
  // Taken out of the heap by a shutdown, so still `scheduled` unless cancel() got here first;
  // either way the ending is ours (cancel() ends only what it took out of the heap itself).
  std::uint32_t s = scheduled;
  state_.compare_exchange_strong(s, cancelled, std::memory_order_acq_rel);
  end(ending::stopped, {});
  release();
}

outcome timer_entry::run() noexcept {
  std::uint32_t s = submitted;
  if (!state_.compare_exchange_strong(s, running, std::memory_order_acq_rel)) {
    end(ending::stopped, {});  // cancelled while queued
    release();
    return outcome::cancelled;
  }
  outcome how = outcome::completed;
  try {
    call();
  } catch (...) {
    report_exception(*owner_, std::current_exception(), thrown_by::timer);
    how = outcome::failed;
  }
  if (period_.count() != 0) {
    timers& q = owner_->timer_queue();
    std::unique_lock lock(q.lock());
    s = running;
    if (state_.compare_exchange_strong(s, scheduled, std::memory_order_acq_rel)) {
      // The next deadline on the period's grid that is still ahead: runs never overlap, and
      // periods missed while this run was late or long are skipped, not bunched.
      const auto now = clock::now();
      const auto missed = now > deadline ? (now - deadline) / period_ : 0;
      deadline += (missed + 1) * period_;
      if (!q.schedule_locked(*this)) return how;
      state_.store(finished, std::memory_order_release);  // the pool's timers have stopped
    }
    lock.unlock();
    end(ending::stopped, {});  // a periodic timer ends only by being stopped
    release();
    return how;
  }
  state_.store(finished, std::memory_order_release);
  end(ending::ran, {});
  release();
  return how;
}

void timer_entry::dropped() noexcept {
  std::uint32_t s = submitted;
  state_.compare_exchange_strong(s, cancelled, std::memory_order_acq_rel);
  end(ending::stopped, {});
  release();
}

bool timer_entry::cancel() noexcept {
  if (done()) return false;  // also the only safe answer once the pool is gone
  timers& q = owner_->timer_queue();
  std::unique_lock lock(q.lock());
  if (q.remove_locked(*this)) {
    state_.store(cancelled, std::memory_order_release);
    lock.unlock();
    end(ending::stopped, {});
    release();
    return true;
  }
  std::uint32_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    const bool stoppable =
        s == scheduled || s == submitted || (s == running && period_.count() != 0);
    if (!stoppable) return false;
    // Whoever holds the entry now (the timer thread, the queued task, the run) sees
    // `cancelled` at its next compare-and-swap and ends it.
    if (state_.compare_exchange_weak(s, cancelled, std::memory_order_acq_rel)) return true;
  }
}

}  // namespace spool::detail
