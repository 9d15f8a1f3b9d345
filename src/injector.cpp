#include "injector.hpp"

namespace spool::detail {

injector::~injector() {
  while (task* t = take_locked()) t->cancel();
}

void injector::append_locked(task* t) noexcept {
  t->next = nullptr;
  if (tail_ != nullptr) {
    tail_->next = t;
  } else {
    head_ = t;
  }
  tail_ = t;
  ++count_;
  size_.store(count_, std::memory_order_seq_cst);
}

task* injector::take_locked() noexcept {
  task* t = head_;
  if (t == nullptr) return nullptr;
  head_ = t->next;
  if (head_ == nullptr) tail_ = nullptr;
  t->next = nullptr;
  --count_;
  size_.store(count_, std::memory_order_seq_cst);
  return t;
}

injector::push_result injector::push(task* t) noexcept {
  std::unique_lock lock(mu_);
  if (closed_) return {errc::shut_down, nullptr};
  task* evicted = nullptr;
  if (full_locked()) {
    switch (policy_) {
      case full_policy::reject:
      case full_policy::caller_runs:
        return {errc::full, nullptr};
      case full_policy::discard_oldest:
        evicted = take_locked();
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
  append_locked(t);
  return {{}, evicted};
}

task* injector::pop() noexcept {
  if (size_.load(std::memory_order_relaxed) == 0) return nullptr;
  std::unique_lock lock(mu_);
  task* t = take_locked();
  bool wake_producer = t != nullptr && blocked_ > 0;
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
