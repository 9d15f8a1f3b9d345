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

injector::push_result injector::push(work_item* t, priority p, bool bypass_bound) noexcept {
  const int level = index(p);
  std::unique_lock lock(mu_);
  if (closed_ && !bypass_bound) return {errc::shut_down, nullptr};
  work_item* evicted = nullptr;
  if (!bypass_bound && full_locked()) {
    switch (policy_) {
      case full_policy::reject:
      case full_policy::caller_runs:
        return {errc::full, nullptr};
      case full_policy::discard_oldest:
        evicted = evict_locked();
        break;
      case full_policy::block:
      case full_policy::block_for: {
        ++blocked_;
        auto room = [this] { return closed_ || !full_locked(); };
        bool got_room = true;
        if (policy_ == full_policy::block) {
          not_full_.wait(lock, room);
        } else {
          got_room = not_full_.wait_for(lock, timeout_, room);
        }
        --blocked_;
        if (closed_) return {errc::shut_down, nullptr};
        if (!got_room) return {errc::timed_out, nullptr};
        break;
      }
    }
  }
  if (level == index(priority::low)) {
    try {
      low_since_.push_back(clock::now());
    } catch (...) {
      return {errc::no_memory, evicted};  // evicted (if any) is still the caller's to cancel
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
  bool wake_producer = t != nullptr && blocked_ > 0;
  lock.unlock();
  if (wake_producer) not_full_.notify_one();
  return t;
}

work_item* injector::pop(priority p) noexcept {
  if (queued(p) == 0) return nullptr;
  std::unique_lock lock(mu_);
  work_item* t = take_locked(index(p));
  bool wake_producer = t != nullptr && blocked_ > 0;
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
  if (level == index(priority::low)) {
    low_since_.erase(low_since_.begin() + static_cast<std::ptrdiff_t>(at));
    publish_oldest_low_locked();
  }
  const bool wake_producer = blocked_ > 0;
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
