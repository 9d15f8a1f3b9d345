// sleep/parker.hpp: where idle workers sleep, and how a submission wakes one. The protocol and why
// it loses no wake-up are in sleep/README.md ("Parking and waking").
//
// Invariants:
//  - `sleepers_` equals the length of the list whenever mu_ is free. A seat is on the list
//    from prepare() until cancel(), a notifier (notify_one, notify_all) or park_until's
//    deadline takes it off; only a listed seat sleeps.
//  - `timed_listed_` is 1 exactly while a listed seat holds the timed role.
//
// Boundary with whoever makes work visible (the notifier) and the sleeper, Dekker-style: the
// sleeper lists itself (a seq_cst read-modify-write of `sleepers_`, then heavy_barrier()) and
// then looks for work once more; the notifier makes the work visible and then, after
// light_barrier(), reads `spinners_` and `sleepers_` (notify_one; a full fence before it
// leaves the work to a spinner). Either the sleeper's look finds the work, or the notifier
// sees the sleeper (or a spinner, who will look) and wakes it (sync/dekker.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "sleep/futex.hpp"
#include "sync/dekker.hpp"

namespace spool::detail {

class parker {
 public:
  // seats: how many threads may sleep here at once, each under its own seat number in
  // [0, seats) (a worker's index). max_spinners: see try_start_spinning().
  explicit parker(std::uint32_t seats = 1, std::uint32_t max_spinners = 1);

  // Spinning: an idle worker may poll for a while before sleeping, but only max_spinners at a
  // time. While anyone spins, a submission wakes nobody (the spinner will take the task), so
  // an oversubscribed pool does not fill its cores with pollers and futex calls.
  bool try_start_spinning() noexcept {
    std::uint32_t n = spinners_.load(std::memory_order_relaxed);
    while (n < max_spinners_) {
      if (spinners_.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  // A spinner that stops must then either take work it found or go through prepare() and look
  // again before parking: a submission that saw it spinning did not wake anyone.
  void stop_spinning() noexcept { spinners_.fetch_sub(1, std::memory_order_seq_cst); }
  // Counts the caller as a spinner whatever the limit, as notify_one counts the sleeper it
  // wakes: a worker about to make work visible that it will look for itself (a watcher firing
  // due timers), so that the notification wakes nobody else. Ends with stop_spinning().
  void start_searching() noexcept { spinners_.fetch_add(1, std::memory_order_seq_cst); }

  // How a park ended. `searching`: notify_one() chose this sleeper and counted it as a
  // spinner on its behalf, so that later submissions wake nobody else until it has looked;
  // the caller must look for work and then call stop_spinning(), as a spinner does.
  enum class wake : unsigned char { timed_out, woken, searching };

  // A worker that found no work calls prepare(seat), then looks for work (and any other
  // condition it waits for) once more, then either cancel()s (it found something) or parks.
  // With want_timed, the seat also takes the *timed role* if no listed sleeper holds it, and
  // prepare() says whether it did: the holder must park with a deadline and, at each one,
  // decide about the wake-ups deferred to it (sleep/README.md, "Deferred wake-ups"). The role
  // ends when the seat leaves the list, however it leaves.
  // With wake_last, the seat goes to the far end of the list, where notify_one reaches it only
  // after the seats listed before it (an isolated waiter, which can take few of the tasks a
  // submission announces; core::help_until).
  bool prepare(std::uint32_t seat, bool want_timed = false, bool wake_last = false) noexcept;
  // prepare(seat, true) for a worker that leaves work queued (a crowded pool's extra worker,
  // sleep_control::retreat), done only if at least `keep` of `live` threads (this one
  // included) would still be off the list after it; false, having done nothing, otherwise.
  // Decided under the lock, so two workers cannot both leave counting on each other.
  // *timed: as prepare's result.
  bool prepare_if_others_awake(std::uint32_t seat, std::uint32_t live, std::uint32_t keep,
                               bool* timed) noexcept;
  // Withdraws from the sleepers. Returns true if a notify_one() had already chosen this seat:
  // the caller then holds a spinner's count, which cancel() has given back, and it must take
  // the work it found or make sure someone will (sleep_control::wake_for_surplus).
  bool cancel(std::uint32_t seat) noexcept;
  wake park(std::uint32_t seat) noexcept;
  // As park(), until the deadline; wake::timed_out means it passed with nobody choosing this
  // seat, which is no longer among the sleepers.
  wake park_until(std::uint32_t seat, std::chrono::steady_clock::time_point deadline) noexcept;

  // Called after making work visible. Costs two loads when nobody sleeps or the wake-up is
  // deferred, and a fence more when it leaves the work to a spinner; otherwise it takes the
  // most recent sleeper off the list and wakes it. With a deferral test: wakes nobody if a
  // sleeper holds the timed role and may_defer() says another awake worker would only crowd
  // the cores; the timed sleeper then looks at its next deadline.
  //
  // The pairings (sleep/README.md, "Parking and waking"). With the sleepers and the timed
  // role, asymmetric: a sleeper lists itself, and the timed sleeper leaves the role, and then
  // takes heavy_barrier() before it looks; here only light_barrier(). With a spinner,
  // symmetric: a spinner stops with a read-modify-write and may then look only once (it may
  // take another task and block in it), so a notifier that leaves the work to it takes a full
  // fence and reads the count again. That check comes last: under a burst on a crowded pool,
  // where a worker spins between tasks, the wake-up is deferred before it is reached.
  template <class Defer>
  void notify_one(Defer may_defer) noexcept {
#ifdef SPOOL_TSAN
    if (sleepers_.fetch_add(0, std::memory_order_seq_cst) == 0) return;
    const bool timed = timed_listed_.fetch_add(0, std::memory_order_seq_cst) != 0;
#else
    light_barrier();
    if (sleepers_.load(std::memory_order_relaxed) == 0) return;
    const bool timed = timed_listed_.load(std::memory_order_relaxed) != 0;
#endif
    if (timed && may_defer()) {
      // A count for tests, kept without a read-modify-write (this is the submitter's path):
      // concurrent notifiers may lose increments, never make it zero.
      deferred_.store(deferred_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
    if (spinners_.load(std::memory_order_relaxed) != 0 && load_after_full_barrier(spinners_) != 0) {
      return;
    }
    wake_one();
  }
  void notify_one() noexcept {
    notify_one([] { return false; });
  }
  // Wakes every sleeper: shutdown, and a future completing that a worker sleeps on.
  void notify_all() noexcept;

  std::uint32_t sleepers() const noexcept { return sleepers_.load(std::memory_order_relaxed); }
  // Whether a listed sleeper holds the timed role; and how many notify_one calls deferred.
  bool timed_listed() const noexcept { return timed_listed_.load(std::memory_order_relaxed) != 0; }
  std::uint64_t deferred() const noexcept { return deferred_.load(std::memory_order_relaxed); }

 private:
  // A seat's word: what its sleeper futex-waits on.
  static constexpr std::uint32_t k_asleep = 0;
  static constexpr std::uint32_t k_woken = 1;      // by notify_all
  static constexpr std::uint32_t k_searching = 2;  // by notify_one, counted as a spinner
  static constexpr std::uint32_t k_unlisted = ~std::uint32_t{0};

  struct alignas(64) seat_state {
    std::atomic<std::uint32_t> word{k_asleep};
    std::uint32_t pos = k_unlisted;  // index in sleeping_, guarded by mu_
  };

  void wake_one() noexcept;
  void list_locked(std::uint32_t seat, bool want_timed, bool* timed,
                   bool wake_last = false) noexcept;
  void unlist_locked(std::uint32_t seat) noexcept;  // takes a listed seat off sleeping_
  wake woken_as(std::uint32_t word) const noexcept {
    return word == k_searching ? wake::searching : wake::woken;
  }

  const std::uint32_t max_spinners_;
  std::unique_ptr<seat_state[]> seats_;
  // The sleepers, most recent last (notify_one wakes the one whose cache is warmest).
  std::mutex mu_;
  std::unique_ptr<std::uint32_t[]> sleeping_;  // guarded by mu_
  std::uint32_t depth_ = 0;                    // guarded by mu_
  std::uint32_t timed_seat_ = k_unlisted;      // the listed seat holding the timed role; mu_
  // notify_all's list of the seats it chose, to wake after releasing mu_.
  std::mutex all_mu_;
  std::unique_ptr<std::uint32_t[]> chosen_;  // guarded by all_mu_
  // depth_, changed under mu_ and read without it: the notifier's half of the Dekker pairing.
  alignas(64) std::atomic<std::uint32_t> sleepers_{0};
  // timed_seat_ != k_unlisted, mirrored the same way (0 or 1); changes with sleepers_.
  std::atomic<std::uint32_t> timed_listed_{0};
  alignas(64) std::atomic<std::uint32_t> spinners_{0};
  alignas(64) std::atomic<std::uint64_t> deferred_{0};
};

}  // namespace spool::detail
