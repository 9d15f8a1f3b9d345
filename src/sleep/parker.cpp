// sleep/parker.cpp: the sleeping half of the parker. Each sleeper waits on its own seat's word, and
// a notifier takes the sleeper it wakes off the list before waking it; so a sleeper that has
// been chosen but not yet scheduled is never counted again, and a burst of submissions costs
// one futex wake per sleeper, not one per submission (sleep/README.md, "Parking and waking").
#include "sleep/parker.hpp"

#include <climits>

namespace spool::detail {

parker::parker(std::uint32_t seats, std::uint32_t max_spinners)
    : max_spinners_(max_spinners),
      seats_(new seat_state[seats]),
      sleeping_(new std::uint32_t[seats]),
      chosen_(new std::uint32_t[seats]) {}

bool parker::prepare(std::uint32_t seat, bool want_timed, bool wake_last) noexcept {
  bool timed = false;
  {
    std::lock_guard lock(mu_);
    list_locked(seat, want_timed, &timed, wake_last);
  }
  // Between listing and the caller's last look: the sleeper's half of the pairing with
  // notify_one, whose notifier takes only the light barrier.
  heavy_barrier();
  return timed;
}

bool parker::prepare_if_others_awake(std::uint32_t seat, std::uint32_t live, std::uint32_t keep,
                                     bool* timed) noexcept {
  {
    std::lock_guard lock(mu_);
    // Of the live threads, depth_ are listed and this one is not: live - depth_ - 1 others
    // stay out of the list.
    if (live < depth_ + 1 + keep) return false;
    list_locked(seat, true, timed);
  }
  heavy_barrier();
  return true;
}

void parker::list_locked(std::uint32_t seat, bool want_timed, bool* timed,
                         bool wake_last) noexcept {
  seat_state& s = seats_[seat];
  s.word.store(k_asleep, std::memory_order_relaxed);
  if (wake_last && depth_ > 0) {
    // The first seat moves to the end; this one takes the first place, the last to be woken.
    const std::uint32_t first = sleeping_[0];
    seats_[first].pos = depth_;
    sleeping_[depth_++] = first;
    s.pos = 0;
    sleeping_[0] = seat;
  } else {
    s.pos = depth_;
    sleeping_[depth_++] = seat;
  }
  // The role first: a reader without the lock that sees this seat counted in sleepers_ also
  // sees its role (tests tell "parked without the role" from "parking with it" this way).
  *timed = want_timed && timed_seat_ == k_unlisted;
  if (*timed) {
    timed_seat_ = seat;
    timed_listed_.exchange(1, std::memory_order_seq_cst);
  }
  // A read-modify-write: the sleeper's half of the Dekker pairing with notify_one (announce,
  // then look again); under the lock, so it always equals depth_ once the lock is free.
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
}

void parker::unlist_locked(std::uint32_t seat) noexcept {
  const std::uint32_t at = seats_[seat].pos;
  const std::uint32_t last = sleeping_[--depth_];
  sleeping_[at] = last;
  seats_[last].pos = at;
  seats_[seat].pos = k_unlisted;
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  if (seat == timed_seat_) {
    // The role ends with the listing: a notifier that reads timed_listed_ as 0 from now on
    // wakes as usual, and one that read 1 before this is seen by this seat's next look.
    timed_seat_ = k_unlisted;
    timed_listed_.exchange(0, std::memory_order_seq_cst);
  }
}

bool parker::cancel(std::uint32_t seat) noexcept {
  std::uint32_t word;
  {
    std::lock_guard lock(mu_);
    if (seats_[seat].pos != k_unlisted) {
      unlist_locked(seat);
      return false;
    }
    word = seats_[seat].word.load(std::memory_order_relaxed);  // set under mu_ when chosen
  }
  if (word != k_searching) return false;
  stop_spinning();
  return true;
}

parker::wake parker::park(std::uint32_t seat) noexcept {
  std::atomic<std::uint32_t>& word = seats_[seat].word;
  for (;;) {
    // Acquire: pairs with the notifier's release, after which this seat is off the list.
    const std::uint32_t w = word.load(std::memory_order_acquire);
    if (w != k_asleep) return woken_as(w);
    futex_wait(word, k_asleep);
  }
}

parker::wake parker::park_until(std::uint32_t seat,
                                std::chrono::steady_clock::time_point deadline) noexcept {
  std::atomic<std::uint32_t>& word = seats_[seat].word;
  for (;;) {
    const std::uint32_t w = word.load(std::memory_order_acquire);
    if (w != k_asleep) return woken_as(w);
    if (!futex_wait_until(word, k_asleep, deadline)) break;
  }
  // The deadline passed. Whoever holds the lock first decides: this sleeper leaves the list,
  // or a notifier already chose it (and set the word under the lock).
  {
    std::lock_guard lock(mu_);
    if (seats_[seat].pos == k_unlisted) return woken_as(word.load(std::memory_order_relaxed));
    unlist_locked(seat);
  }
  // The caller looks for work next: the heavy barrier between leaving the list (and the timed
  // role) and that look is the sleeper's half of the pairing with notify_one.
  heavy_barrier();
  return wake::timed_out;
}

void parker::wake_one() noexcept {
  std::atomic<std::uint32_t>* word;
  {
    std::lock_guard lock(mu_);
    if (depth_ == 0) return;  // another notifier took the last one
    const std::uint32_t seat = sleeping_[depth_ - 1];
    unlist_locked(seat);
    // Counted as a spinner from now until it has looked: submissions in between wake nobody.
    spinners_.fetch_add(1, std::memory_order_seq_cst);
    word = &seats_[seat].word;
    word->store(k_searching, std::memory_order_release);
  }
  // After the unlock the seat may already have been re-taken by its worker, parked again, and
  // be waiting on k_asleep: this wake is then spurious, and park() sleeps again.
  futex_wake(*word, 1);
}

void parker::notify_all() noexcept {
  if (load_after_full_barrier(sleepers_) == 0) return;
  // Every sleeper listed now is chosen at once, under one hold of the lock: choosing them a
  // few at a time would let a sleeper that arrives meanwhile take the place of one that was
  // already waiting (the list is a stack), and leave that one asleep. The futex calls come
  // after the lock, from a list kept under all_mu_ (one notify_all at a time uses it).
  std::lock_guard all(all_mu_);
  std::uint32_t n = 0;
  {
    std::lock_guard lock(mu_);
    while (depth_ != 0) {
      const std::uint32_t seat = sleeping_[depth_ - 1];
      unlist_locked(seat);
      seats_[seat].word.store(k_woken, std::memory_order_release);
      chosen_[n++] = seat;
    }
  }
  for (std::uint32_t i = 0; i < n; ++i) futex_wake(seats_[chosen_[i]].word, INT_MAX);
}

}  // namespace spool::detail
