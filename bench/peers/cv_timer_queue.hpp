// cv_timer_queue.hpp: the conventional timer queue, written here as the baseline the timers
// experiment measures against: one std::thread sleeping on a std::condition_variable until the
// earliest deadline of a std::priority_queue, and running each due callback itself. Every
// schedule takes the one lock and notifies the thread when the new deadline is the earliest.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

namespace bench {

class cv_timer_queue {
 public:
  using clock = std::chrono::steady_clock;

  cv_timer_queue() : thread_([this] { run(); }) {}
  // Drops what is still pending, then joins.
  ~cv_timer_queue() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  cv_timer_queue(const cv_timer_queue&) = delete;
  cv_timer_queue& operator=(const cv_timer_queue&) = delete;

  void post_at(clock::time_point deadline, std::function<void()> f) {
    bool earliest;
    {
      std::lock_guard lock(mu_);
      earliest = queue_.empty() || deadline < queue_.top().deadline;
      queue_.push({deadline, order_++, std::move(f)});
    }
    if (earliest) wake_.notify_one();
  }

 private:
  struct entry {
    clock::time_point deadline;
    unsigned long order;
    std::function<void()> f;
    // priority_queue keeps the greatest on top: the earliest deadline must compare greatest.
    bool operator<(const entry& other) const {
      return deadline != other.deadline ? deadline > other.deadline : order > other.order;
    }
  };

  void run() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      if (queue_.empty()) {
        wake_.wait(lock);
      } else if (clock::now() < queue_.top().deadline) {
        wake_.wait_until(lock, queue_.top().deadline);
      } else {
        std::function<void()> f = std::move(const_cast<entry&>(queue_.top()).f);
        queue_.pop();
        lock.unlock();
        f();
        lock.lock();
      }
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::priority_queue<entry> queue_;
  unsigned long order_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace bench
