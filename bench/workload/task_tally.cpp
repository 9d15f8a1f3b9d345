#include "workload/task_tally.hpp"

#include <deque>
#include <mutex>

namespace bench {

namespace {
std::mutex enroll_mutex;
std::deque<task_tally::slot> slots;  // a deque never moves its elements
}  // namespace

task_tally::slot* task_tally::enroll() {
  std::lock_guard lock(enroll_mutex);
  return &slots.emplace_back();
}

void task_tally::reset() {
  std::lock_guard lock(enroll_mutex);
  for (slot& s : slots) s.count.store(0, std::memory_order_relaxed);
}

std::uint64_t task_tally::total() {
  std::lock_guard lock(enroll_mutex);
  std::uint64_t sum = 0;
  for (const slot& s : slots) sum += s.count.load(std::memory_order_relaxed);
  return sum;
}

}  // namespace bench
