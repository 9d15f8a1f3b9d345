// queues/queues.cpp: stealing, and the queues' constructor and size (see queues.hpp).
#include "queues/queues.hpp"

#include <sched.h>

#include <vector>

#include "queues/queues_testing.hpp"
#include "quiescence/quiescence.hpp"
#include "sleep/sleep.hpp"

namespace spool::detail {
namespace {

// Lock-free lanes for this many distinct outside threads; later ones share the injector.
constexpr std::size_t k_producer_slots = 32;

std::atomic<void (*)()> take_back_pause{nullptr};  // queues_testing
std::atomic<void (*)()> fill_pause{nullptr};       // queues_testing

}  // namespace

namespace queues_testing {
void set_take_back_pause(void (*pause)()) noexcept {
  take_back_pause.store(pause, std::memory_order_relaxed);
}
void set_fill_pause(void (*pause)()) noexcept {
  fill_pause.store(pause, std::memory_order_relaxed);
}
}  // namespace queues_testing

queues::queues(const config& cfg, const roster& workers, sleep_control& wake)
    : aging_(cfg.aging),
      workers_(workers),
      wake_(wake),
      injector_(cfg.queue_capacity, cfg.on_full, cfg.block_timeout),
      // discard_oldest evicts the oldest queued task, which only one FIFO can tell: a pool
      // with that policy keeps every outside submission in the injector.
      slots_(cfg.queue_capacity == 0 || cfg.on_full != full_policy::discard_oldest
                 ? k_producer_slots
                 : 0,
             workers) {
  if (!cfg.affinity.empty()) {
    places_ = worker_places(cfg.affinity, read_topology(), workers.capacity());
    if (!places_.empty()) near_ = places_.data();
  }
}

work_item* queues::take_high(worker& w) noexcept {
  if (aging_.count() > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (!w.high_streak) {
      w.high_streak = true;
      w.high_since = now;
    } else if (now - w.high_since >= aging_) {
      // High-priority work has held this worker for `aging`: one normal task goes first.
      if (work_item* t = find_normal(w)) {
        w.high_streak = false;
        return t;
      }
    }
  }
  return injector_.pop(priority::high);
}

work_item* queues::find_isolated(worker& w, region_match region, bool own_deque) noexcept {
  if (!injector_.empty() && injector_.queued(priority::high) != 0) {
    if (work_item* t = injector_.pop_isolated(priority::high, region)) return t;
  }
  if (!own_deque) {
    if (injector_.empty()) return nullptr;
    if (work_item* t = injector_.pop_isolated(priority::normal, region)) return t;
    return injector_.pop_isolated(priority::low, region);
  }
  // Pop past other regions' tasks at the bottom of the own deque and put them back in their
  // order. Held on the stack up to k_pass_over, then in a vector; without memory for it the
  // pass stops there (the region's tasks below are then left to thieves this time). Pushing
  // back never grows the ring (it holds no more than before the pops), so push() cannot
  // throw here.
  constexpr std::size_t k_pass_over = 64;
  work_item* passed[k_pass_over];
  std::vector<work_item*> more;
  std::size_t n = 0;
  work_item* found = nullptr;
  for (;;) {
    work_item* t = w.deque.pop();
    if (t == nullptr) break;
    if (region(t)) {
      found = t;
      break;
    }
    if (n < k_pass_over) {
      passed[n++] = t;
      continue;
    }
    try {
      more.push_back(t);
    } catch (...) {
      w.deque.push(t);
      break;
    }
  }
  for (std::size_t i = more.size(); i-- > 0;) w.deque.push(more[i]);
  for (std::size_t i = n; i-- > 0;) w.deque.push(passed[i]);
  // Those tasks were out of sight between the pop and the push: a searcher may have missed
  // them and gone to sleep (the parking protocol, sleep/README.md).
  if (n != 0) wake_.notify_worker();
  if (found != nullptr) return found;
  if (injector_.empty()) return nullptr;
  if (work_item* t = injector_.pop_isolated(priority::normal, region)) return t;
  return injector_.pop_isolated(priority::low, region);
}

work_item* queues::steal(worker& w) noexcept {
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
  const auto ws = workers_.all();
  const std::size_t n = ws.size();
  if (w.batch_hint < n && ws[w.batch_hint].get() != &w) {
    // While one producer's burst is served, its tasks sit in one batch at a time: try the
    // last batch that gave a task before walking every deque and batch. A lost race here is
    // settled by the full search below.
    if (work_item* t = ws[w.batch_hint]->batch.take().item) return t;
  }
  for (int round = 0;; ++round) {
    // Reset each round: what run_worker reads is the last round's, the one that found nothing.
    w.met_served_slot = false;
    const std::size_t slots = slots_.in_use();
    if (n < 2 && slots == 0) return nullptr;
    bool contended = false;
    if (n >= 2 && near_ != nullptr) {
      if (work_item* t = steal_near(w, ws, contended)) return t;
    } else if (n >= 2) {
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
          quiescence::stole(w);
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

work_item* queues::steal_near(worker& w, std::span<const std::unique_ptr<worker>> ws,
                              bool& contended) noexcept {
  // A random start within each group of equally near victims, as steal() does over all.
  w.rng ^= w.rng << 13;
  w.rng ^= w.rng >> 7;
  w.rng ^= w.rng << 17;
  const std::size_t start = static_cast<std::size_t>(w.rng % ws.size());
  const std::span<const place> places(near_, ws.size());
  work_item* found = nullptr;
  for_each_victim(w.index, ws.size(), places, start, [&](std::size_t v) {
    auto [t, retry] = ws[v]->deque.steal();
    contended |= retry;
    if (t == nullptr) return false;
    quiescence::stole(w);
    found = t;
    return true;
  });
  if (found != nullptr) return found;
  for_each_victim(w.index, ws.size(), places, start, [&](std::size_t v) {
    auto [t, retry] = ws[v]->batch.take();
    contended |= retry;
    if (t == nullptr) return false;
    w.batch_hint = v;
    found = t;
    return true;
  });
  return found;
}

ws_deque::steal_result queues::take_from_slot(worker& w, producer_slot& slot) noexcept {
  if (slot.deque.empty()) return {nullptr, false};
  // A held lock. When the holder is a worker filling its batch (below), it serves this slot,
  // and meeting it is not a lost race: the filler wakes a sleeper when it lets go, and a batch
  // that holds the slot's earlier tasks is in every searcher's view. A searcher that stops here
  // goes through the parker's prepare() and a last look before it sleeps, which finds either
  // the batch or the slot again, or is seen by the filler's notify_worker (README.md, "Steal
  // races"). Counting these as lost races would make every idle worker of an oversubscribed
  // pool circle here and yield, taking the cores from the producer and from the holder itself.
  // A brief holder (an outside thread taking its own task back, or reclaiming the slot) takes
  // no run and wakes nobody: meeting it is a lost race, and the search looks again.
  std::uint8_t held;
  if (!slot.lock_batching(producer_slot::k_filling, &held)) {
    if (held == producer_slot::k_filling) w.met_served_slot = true;
    return {nullptr, held == producer_slot::k_brief};
  }
  // Under the lock no batch can be filled from this slot, so one that still holds its tasks
  // keeps holding them until taken: those go first.
  if (slots_.held_by_batch(slot)) {
    slot.unlock_batching();
    w.met_served_slot = true;
    return {nullptr, false};
  }
  // w's own batch is empty: find_normal took from it first, and only w fills it.
  work_item* run[stolen_batch::k_capacity];
  auto [count, retry] = slot.deque.steal_batch(run, stolen_batch::k_capacity);
  if (void (*pause)() = fill_pause.load(std::memory_order_relaxed)) pause();
  if (count > 1) w.batch.fill(&slot, run + 1, count - 1);
  slot.unlock_batching();
  // The run leaves a bounded pool's count (README.md, "The bound"): one read-modify-write per
  // run, after the lock, since it may wake a blocked producer.
  if (count > 0) injector_.release(count);
  // The run was out of sight between the CAS on the slot and the fill: a worker that looked
  // then saw neither and may have gone to sleep. Making the batch visible is a submission
  // like any other for the parking protocol (sleep/README.md).
  if (count > 1) wake_.notify_worker();
  return {count > 0 ? run[0] : nullptr, retry};
}

bool queues::take_back(const work_item* t) noexcept {
  producer_slot* slot = slots_.cached();
  if (slot != nullptr) slot->owner_waits_for(t);
  // Only the oldest task is taken back: if t is not it now, leave the lock to the workers.
  if (slot == nullptr || !slot->deque.oldest_is(t)) return false;
  std::uint8_t held;
  if (!slot->lock_batching(producer_slot::k_brief, &held)) return false;
  const bool took = !slots_.held_by_batch(*slot) && slot->deque.steal_if(t);
  if (void (*pause)() = take_back_pause.load(std::memory_order_relaxed)) pause();
  slot->unlock_batching();
  if (took) injector_.release(1);
  return took;
}

std::size_t queues::size() const noexcept {
  std::size_t n = injector_.size();
  for (const auto& w : workers_.all()) n += w->deque.size() + w->batch.size();
  for (std::size_t i = 0, k = slots_.in_use(); i < k; ++i) n += slots_[i].deque.size();
  return n;
}

}  // namespace spool::detail
