// The bounded injector alone: FIFO order, capacity, and closing.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <latch>
#include <thread>
#include <vector>

#include "queues/injector.hpp"

namespace {

using spool::errc;
using spool::full_policy;
using spool::detail::injector;
using spool::detail::work_item;

struct tag final : work_item {
  explicit tag(int i) : id(i) {}
  spool::detail::outcome run(spool::detail::core&) noexcept override {
    return spool::detail::outcome::completed;
  }
  void cancel() noexcept override { cancelled = true; }
  void destroy() noexcept override {}
  int id;
  bool cancelled = false;
};

int id_of(work_item* t) { return static_cast<tag*>(t)->id; }

TEST(Injector, FifoUnbounded) {
  injector q(0, full_policy::block, std::chrono::seconds(1));
  std::deque<tag> tags;
  for (int i = 0; i < 100; ++i) tags.emplace_back(i);
  for (auto& t : tags) EXPECT_FALSE(q.push(&t).error);
  EXPECT_EQ(q.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(id_of(q.pop()), i);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

TEST(Injector, RejectWhenFullKeepsTheQueue) {
  injector q(2, full_policy::reject, std::chrono::seconds(1));
  tag a(1), b(2), c(3);
  EXPECT_FALSE(q.push(&a).error);
  EXPECT_FALSE(q.push(&b).error);
  EXPECT_EQ(q.push(&c).error, errc::full);
  EXPECT_EQ(id_of(q.pop()), 1);
  EXPECT_FALSE(q.push(&c).error);
  EXPECT_EQ(id_of(q.pop()), 2);
  EXPECT_EQ(id_of(q.pop()), 3);
}

TEST(Injector, DiscardOldestHandsBackTheEvictedTask) {
  injector q(2, full_policy::discard_oldest, std::chrono::seconds(1));
  tag a(1), b(2), c(3);
  q.push(&a);
  q.push(&b);
  auto r = q.push(&c);
  EXPECT_FALSE(r.error);
  ASSERT_NE(r.evicted, nullptr);
  EXPECT_EQ(id_of(r.evicted), 1);
  EXPECT_EQ(id_of(q.pop()), 2);
  EXPECT_EQ(id_of(q.pop()), 3);
}

// The timeout path: nothing frees room, so the push reports timed_out and leaves the queue as it
// was.
TEST(Injector, BlockForTimesOut) {
  injector q(1, full_policy::block_for, std::chrono::milliseconds(5));
  tag a(1), b(2);
  q.push(&a);
  EXPECT_EQ(q.push(&b).error, errc::timed_out);
  EXPECT_EQ(q.size(), 1u);
}

// A producer blocked on a full queue resumes when a consumer makes room.
TEST(Injector, BlockedProducerResumesWhenRoomIsMade) {
  injector q(1, full_policy::block, std::chrono::seconds(1));
  tag a(1), b(2);
  q.push(&a);
  std::latch started(1);
  std::error_code result = errc::invalid_argument;
  std::thread producer([&] {
    started.count_down();
    result = q.push(&b).error;
  });
  started.wait();
  // Pop until the producer's task shows up: the first pop makes room and wakes the producer.
  EXPECT_EQ(id_of(q.pop()), 1);
  work_item* t = nullptr;
  while ((t = q.pop()) == nullptr) std::this_thread::yield();
  producer.join();
  EXPECT_FALSE(result);
  EXPECT_EQ(id_of(t), 2);
}

// Closing wakes a producer blocked on a full queue with shut_down, and refuses later pushes.
TEST(Injector, CloseWakesBlockedProducers) {
  injector q(1, full_policy::block, std::chrono::seconds(1));
  tag a(1), b(2), c(3);
  q.push(&a);
  std::latch started(1);
  std::error_code result;
  std::thread producer([&] {
    started.count_down();
    result = q.push(&b).error;
  });
  started.wait();
  q.close();
  producer.join();
  EXPECT_EQ(result, errc::shut_down);
  EXPECT_EQ(q.push(&c).error, errc::shut_down);
  EXPECT_TRUE(q.closed());
  EXPECT_EQ(id_of(q.pop()), 1);  // what was accepted stays
}

}  // namespace
