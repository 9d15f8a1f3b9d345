// mutex_pool.hpp: the conventional thread pool, written here as the baseline the others are
// measured against: one std::queue of std::function behind one std::mutex, idle workers asleep
// on a std::condition_variable, and a pending count for "wait until everything has run".
// Every submission and every completion takes the one lock; that is the point of the baseline.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace bench {

class mutex_pool {
 public:
  explicit mutex_pool(unsigned threads);
  // Runs what is queued, then joins.
  ~mutex_pool();
  mutex_pool(const mutex_pool&) = delete;
  mutex_pool& operator=(const mutex_pool&) = delete;

  void post(std::function<void()> task);
  // Blocks until nothing is queued or running. From inside a task it would wait for itself.
  void wait_idle();

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable work_ready_;  // a task was queued, or stopping_ was set
  std::condition_variable idle_;        // pending_ reached zero
  std::queue<std::function<void()>> queue_;
  std::size_t pending_ = 0;  // queued + running
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace bench
