// queues/injector.cpp: the injector's FIFOs, bound and full-queue policies (see injector.hpp).
#include "queues/injector.hpp"

namespace spool::detail {

injector::~injector() {
  while (work_item* t = take_highest_locked()) t->cancel();
}

void injector::append_locked(work_item* t, int level) noexcept {
  fifo& q = levels_[level];
  t->next = nullptr;
  if (q.tail != nullptr) {
    q.tail->next = t;
  } else {
    q.head = t;
  }
  q.tail = t;
  ++count_;
  level_size_[level].fetch_add(1, std::memory_order_relaxed);
  size_.store(count_, std::memory_order_seq_cst);
}

work_item* injector::take_locked(int level) noexcept {
  fifo& q = levels_[level];
  work_item* t = q.head;
  if (t == nullptr) return nullptr;
  q.head = t->next;
  if (q.head == nullptr) q.tail = nullptr;
  t->next = nullptr;
  --count_;
  level_size_[level].fetch_sub(1, std::memory_order_relaxed);
  size_.store(count_, std::memory_order_seq_cst);
  unreserve_locked();
  if (level == index(priority::low)) {
    low_since_.pop_front();
    publish_oldest_low_locked();
  }
  return t;
}

work_item* injector::take_highest_locked() noexcept {
  for (int level = k_levels - 1; level >= 0; --level) {
    if (work_item* t = take_locked(level)) return t;
  }
  return nullptr;
}

work_item* injector::evict_locked() noexcept {
  for (int level = 0; level < k_levels; ++level) {
    if (work_item* t = take_locked(level)) return t;
  }
  return nullptr;
}

void injector::publish_oldest_low_locked() noexcept {
  const clock::time_point oldest =
      low_since_.empty() ? clock::time_point::max() : low_since_.front();
  oldest_low_.store(oldest.time_since_epoch().count(), std::memory_order_relaxed);
}

std::error_code injector::wait_for_room_locked(std::unique_lock<std::mutex>& lock) noexcept {
  blocked_.fetch_add(1, std::memory_order_seq_cst);
  bool got_room = true;
  auto room = [this] { return room_locked(); };
  if (policy_ == full_policy::block_for) {
    got_room = not_full_.wait_for(lock, timeout_, room);
  } else {
    not_full_.wait(lock, room);
  }
  blocked_.fetch_sub(1, std::memory_order_relaxed);
  // room_locked() reads closed_ first and reserves nothing once it is set.
  if (closed_) return errc::shut_down;
  return got_room ? std::error_code{} : std::error_code{errc::timed_out};
}

void injector::wake_blocked(std::size_t n) noexcept {
  // Taking mu_ orders this after a waiter's look at the count: it is waiting by now, or it
  // looks again (release()'s pairing, in the header).
  { std::lock_guard lock(mu_); }
  if (n == 1) {
    not_full_.notify_one();
  } else {
    not_full_.notify_all();
  }
}

injector::push_result injector::push(work_item* t, priority p, bool bypass_bound) noexcept {
  const int level = index(p);
  std::unique_lock lock(mu_);
  if (closed_ && !bypass_bound) return {errc::shut_down, nullptr};
  work_item* evicted = nullptr;
  if (capacity_ != 0 && bypass_bound) {
    used_.fetch_add(1, std::memory_order_seq_cst);  // counted, never refused
  } else if (capacity_ != 0 && !try_reserve()) {
    switch (policy_) {
      case full_policy::reject:
      case full_policy::caller_runs:
        return {errc::full, nullptr};
      case full_policy::discard_oldest:
        // The evicted task's room goes to t. Only this path (under mu_) and the workers'
        // bypassing pushes raise the count of a discard_oldest pool, which has no slots.
        evicted = evict_locked();
        used_.fetch_add(1, std::memory_order_seq_cst);
        break;
      case full_policy::block:
      case full_policy::block_for:
        if (std::error_code why = wait_for_room_locked(lock)) return {why, nullptr};
        break;
    }
  }
  if (level == index(priority::low)) {
    try {
      low_since_.push_back(clock::now());
    } catch (...) {
      // The room t was given goes back (none for an unbounded injector); evicted (if any) is
      // still the caller's to cancel.
      lock.unlock();
      release(1);
      return {errc::no_memory, evicted};
    }
    if (low_since_.size() == 1) publish_oldest_low_locked();
  }
  append_locked(t, level);
  return {{}, evicted};
}

work_item* injector::pop() noexcept {
  if (size_.load(std::memory_order_relaxed) == 0) return nullptr;
  std::unique_lock lock(mu_);
  work_item* t = take_highest_locked();
  bool wake_producer = t != nullptr && blocked_.load(std::memory_order_relaxed) > 0;
  lock.unlock();
  if (wake_producer) not_full_.notify_one();
  return t;
}

work_item* injector::pop(priority p) noexcept {
  if (queued(p) == 0) return nullptr;
  std::unique_lock lock(mu_);
  work_item* t = take_locked(index(p));
  bool wake_producer = t != nullptr && blocked_.load(std::memory_order_relaxed) > 0;
  lock.unlock();
  if (wake_producer) not_full_.notify_one();
  return t;
}

work_item* injector::pop_isolated(priority p, region_match region) noexcept {
  if (queued(p) == 0) return nullptr;
  const int level = index(p);
  std::unique_lock lock(mu_);
  fifo& q = levels_[level];
  work_item* prev = nullptr;
  std::size_t at = 0;  // position in the level, for the low level's enqueue times
  work_item* t = q.head;
  for (; t != nullptr && !region(t); prev = t, t = t->next) ++at;
  if (t == nullptr) return nullptr;
  if (prev == nullptr) {
    q.head = t->next;
  } else {
    prev->next = t->next;
  }
  if (q.tail == t) q.tail = prev;
  t->next = nullptr;
  --count_;
  level_size_[level].fetch_sub(1, std::memory_order_relaxed);
  size_.store(count_, std::memory_order_seq_cst);
  unreserve_locked();
  if (level == index(priority::low)) {
    low_since_.erase(low_since_.begin() + static_cast<std::ptrdiff_t>(at));
    publish_oldest_low_locked();
  }
  const bool wake_producer = blocked_.load(std::memory_order_relaxed) > 0;
  lock.unlock();
  if (wake_producer) not_full_.notify_one();
  return t;
}

void injector::close() noexcept {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  not_full_.notify_all();
}

bool injector::closed() const noexcept {
  std::lock_guard lock(mu_);
  return closed_;
}

}  // namespace spool::detail
