// queues/queues.hpp: where tasks wait, and how a worker finds the next one.
//
// State: the injector (the shared queue, one FIFO per priority, and the bound; injector.hpp)
// and the producer slots (one deque per outside thread; producer_slots.hpp). Each worker's
// own deque and stolen batch live in its slot (worker.hpp); this part is what searches them.
//
// Search order (README.md, "Priorities"): injector high -> own deque -> own stolen batch ->
// injector normal -> steal (other deques, other batches, producer slots) -> injector low, with
// aging letting a waiting low task, or a normal task behind a long run of high ones, go first.
// Victims are tried from a random one on; pinned workers with a known topology try those on
// the same core, then the same last-level cache, then the same NUMA node first (README.md,
// "Steal order").
//
// Invariants:
//  - A producer slot's tasks start in submission order across all workers (queues::steal,
//    "Order"; README.md, "Producer slots and stolen batches").
//  - steal() returns null only once it has seen every deque and batch empty or served by
//    someone else (a lost race means "not empty" and is retried).
//
// Boundary with sleep/: whoever makes a task visible calls sleep_control::notify_worker()
// afterwards (the parker's Dekker pairing, sleep/README.md). Here that is take_from_slot,
// which moves a run of a slot's tasks out of sight and back into a batch.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "placement/topology.hpp"
#include "queues/injector.hpp"
#include "queues/producer_slots.hpp"
#include "queues/stolen_batch.hpp"
#include "queues/ws_deque.hpp"
#include "spool/spool.hpp"
#include "worker/worker.hpp"

namespace spool::detail {

class sleep_control;

class queues {
 public:
  queues(const config& cfg, const roster& workers, sleep_control& wake);
  queues(const queues&) = delete;
  queues& operator=(const queues&) = delete;

  injector& shared() noexcept { return injector_; }
  const injector& shared() const noexcept { return injector_; }
  producer_slots& slots() noexcept { return slots_; }
  const producer_slots& slots() const noexcept { return slots_; }

  // The next task for w, by the search order above; null if none was found.
  work_item* find_task(worker& w) noexcept {
    // One load of the injector's total first: a pool whose injector is empty (normal priority,
    // outside threads in their slots) pays nothing more for priorities on this path.
    const bool injected = !injector_.empty();
    if (injected && injector_.queued(priority::high) != 0) {
      if (work_item* t = take_high(w)) return t;
    }
    w.high_streak = false;
    if (injected && ++w.searches % 64 == 0 && aging_.count() > 0 &&
        injector_.queued(priority::low) != 0 &&
        std::chrono::steady_clock::now() - injector_.oldest_low() >= aging_) {
      if (work_item* t = injector_.pop(priority::low)) return t;
    }
    if (work_item* t = find_normal(w)) return t;
    return injector_.pop(priority::low);
  }

  // The next task of isolation region `region` for w (a wait inside spool::isolate), or the
  // task the wait is for (region_match): from the injector's high level, then w's own deque,
  // then the injector's normal and low levels.
  // Other tasks at the bottom of w's deque are popped past, however many, and put back in
  // their order (then notify_worker: they were out of sight meanwhile). Never steals: a
  // region's task held by another worker is that worker's to run, or any idle worker's.
  // With own_deque false only the injector is searched: w's last look before it parks, when
  // no other thread can have pushed to w's deque since w's previous look (only w pushes
  // there), and a pass over it would notify w itself, listed by then.
  work_item* find_isolated(worker& w, region_match region, bool own_deque = true) noexcept;

  // The calling thread (outside the pool) takes t back from its own producer slot, to run it
  // itself: only if t is the oldest task queued there and no worker's batch holds older ones
  // of that slot, so the slot's tasks still start in submission order. Under the slot's
  // batching lock, as a worker taking a run would be. False if t is not there (taken already,
  // not the oldest, another thread's slot, or no slot: a discard_oldest pool, or a thread
  // past the slot count).
  bool take_back(const work_item* t) noexcept;

  // Whether any queue holds a task (a snapshot, for the parking protocol's last looks).
  bool has_work() const noexcept {
    if (!injector_.empty()) return true;
    for (const auto& w : workers_.all()) {
      if (!w->deque.empty() || !w->batch.empty()) return true;
    }
    for (std::size_t i = 0, n = slots_.in_use(); i < n; ++i) {
      if (!slots_[i].deque.empty()) return true;
    }
    return false;
  }

  // Tasks queued anywhere (statistics).
  std::size_t size() const noexcept;

  // Takes every task queued now, from the calling thread, and passes each to drop
  // (shutdown(discard)).
  template <class Drop>
  void drain(Drop drop) noexcept {
    while (work_item* t = injector_.pop()) drop(t);
    // `take` is a deque's steal or a batch's take: both say "retry" when they lost a race.
    auto sweep = [&drop](auto take) {
      for (;;) {
        auto [t, retry] = take();
        if (t != nullptr) {
          drop(t);
        } else if (!retry) {
          return;
        }
      }
    };
    for (const auto& w : workers_.all()) {
      sweep([&] { return w->deque.steal(); });
      sweep([&] { return w->batch.take(); });
    }
    for (std::size_t i = 0, n = slots_.in_use(); i < n; ++i) {
      sweep([&] {
        auto r = slots_[i].deque.steal();
        if (r.item != nullptr) injector_.release(1);
        return r;
      });
    }
  }

  // The calling thread's producer slot for a batch of tasks (post_n, a range's ticket), or
  // null: a bounded pool takes batches through the injector, each task meeting the bound.
  producer_slot* slot_for_batches() noexcept {
    return injector_.bounded() ? nullptr : slots_.mine();
  }

 private:
  work_item* find_normal(worker& w) noexcept {
    if (work_item* t = w.deque.pop()) return t;
    // A run this worker took from a producer slot. Taken from the front like anyone else's,
    // so a retry only means a thief took that entry: look again.
    for (;;) {
      auto [t, retry] = w.batch.take();
      if (t != nullptr) return t;
      if (!retry) break;
    }
    if (work_item* t = injector_.pop(priority::normal)) return t;
    return steal(w);
  }
  work_item* take_high(worker& w) noexcept;
  work_item* steal(worker& w) noexcept;
  // steal()'s walk over the other workers' deques, then their batches, nearest first
  // (placement/topology.hpp); only for pinned workers with a known topology.
  work_item* steal_near(worker& w, std::span<const std::unique_ptr<worker>> ws,
                        bool& contended) noexcept;
  // One task of `slot` for w, taking a run of them into w's batch (steal, "Order").
  ws_deque::steal_result take_from_slot(worker& w, producer_slot& slot) noexcept;

  const std::chrono::nanoseconds aging_;
  const roster& workers_;
  sleep_control& wake_;
  injector injector_;
  producer_slots slots_;  // none for a discard_oldest pool (see producer_slots.hpp)
  // Each worker slot's place, when config::affinity pins the workers and the topology is
  // known (placement/topology.hpp); empty otherwise. near_ is its data, or null: steal()'s one
  // load to choose the walk.
  std::vector<place> places_;
  const place* near_ = nullptr;
};

}  // namespace spool::detail
