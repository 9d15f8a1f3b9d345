#include "peers/mutex_pool.hpp"

#include <utility>

namespace bench {

mutex_pool::mutex_pool(unsigned threads) {
  threads_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

mutex_pool::~mutex_pool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void mutex_pool::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push(std::move(task));
    ++pending_;
  }
  work_ready_.notify_one();
}

void mutex_pool::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return pending_ == 0; });
}

void mutex_pool::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has been taken
    std::function<void()> task = std::move(queue_.front());
    queue_.pop();
    lock.unlock();
    task();
    lock.lock();
    if (--pending_ == 0) idle_.notify_all();
  }
}

}  // namespace bench
