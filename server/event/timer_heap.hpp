// event/timer_heap.hpp: the deadlines of one event loop's connections, earliest first.
//
// An intrusive binary min-heap. Each timed object embeds a timer_heap::node (its deadline and
// its place in the heap), so arming, moving and removing a timer cost O(log n) and allocate
// nothing beyond the heap's array of pointers. A loop sleeps until next() and then takes what
// is due with pop_due(); a loop with nothing armed sleeps until an event.
//
// Deadlines that move later are left where they are. A connection's deadline moves later on
// nearly every read and write (each request restarts its idle or header timeout), so arm()
// only ever moves a node earlier: a later deadline leaves the node at the earlier one, where it
// fires early; the owner then finds nothing due (connection::on_deadline checks deadline()
// itself) and arms the true deadline. A keep-alive connection thus costs one early firing per
// timeout period instead of two heap operations per request.
//
// Invariants: heap_[i]->timer.index == i for every object in the heap, and index == npos for
// one that is not in it; no node's deadline is earlier than its parent's. Only the loop's own
// thread touches the heap and its nodes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace spoold {

struct timer_node {
  static constexpr std::size_t npos = SIZE_MAX;
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::time_point::max();
  std::size_t index = npos;
  [[nodiscard]] bool armed() const noexcept { return index != npos; }
};

// T has a public `timer_node timer`.
template <class T>
class timer_heap {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // Due at `at` at the latest: arms t if it is not armed, moves it earlier if it is armed
  // later; an armed t stays put if `at` is later (see above). max() arms nothing.
  void arm(T& t, time_point at) {
    timer_node& n = t.timer;
    if (n.armed()) {
      if (at < n.at) {
        n.at = at;
        up(n.index);
      }
      return;
    }
    if (at == time_point::max()) return;
    heap_.push_back(&t);  // may throw std::bad_alloc; t is then still unarmed
    n.at = at;
    n.index = heap_.size() - 1;
    up(n.index);
  }

  void disarm(T& t) noexcept {
    timer_node& n = t.timer;
    if (!n.armed()) return;
    const std::size_t i = n.index;
    n.index = timer_node::npos;
    T* last = heap_.back();
    heap_.pop_back();
    if (last == &t) return;
    heap_[i] = last;
    last->timer.index = i;
    if (!down(i)) up(i);
  }

  // The earliest armed deadline; max() with nothing armed.
  [[nodiscard]] time_point next() const noexcept {
    return heap_.empty() ? time_point::max() : heap_.front()->timer.at;
  }

  // Takes the earliest object off the heap if it is due at `now`; nullptr otherwise.
  T* pop_due(time_point now) noexcept {
    if (heap_.empty() || heap_.front()->timer.at > now) return nullptr;
    T* t = heap_.front();
    disarm(*t);
    return t;
  }

  [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }

 private:
  void place(std::size_t i, T* t) noexcept {
    heap_[i] = t;
    t->timer.index = i;
  }
  void up(std::size_t i) noexcept {
    T* t = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!(t->timer.at < heap_[parent]->timer.at)) break;
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, t);
  }
  // True if the element at i moved.
  bool down(std::size_t i) noexcept {
    T* t = heap_[i];
    const std::size_t start = i;
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= heap_.size()) break;
      if (child + 1 < heap_.size() && heap_[child + 1]->timer.at < heap_[child]->timer.at) {
        ++child;
      }
      if (!(heap_[child]->timer.at < t->timer.at)) break;
      place(i, heap_[child]);
      i = child;
    }
    place(i, t);
    return i != start;
  }

  std::vector<T*> heap_;
};

}  // namespace spoold
