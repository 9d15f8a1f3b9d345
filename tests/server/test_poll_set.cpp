// The poll loops' turn (server/event/poll_set.hpp): indices follow the order of add(), a
// descriptor reports only its own events and only after a wait that saw events, a wait with
// nothing ready ends at its deadline or at once when the deadline has passed, and clear()
// starts a turn with no descriptors and no events.
#include "event/poll_set.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>

namespace spoold {
namespace {

// A pipe, closed at the end of the test.
struct pipe_pair {
  int read_fd = -1;
  int write_fd = -1;
  pipe_pair() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    read_fd = fds[0];
    write_fd = fds[1];
  }
  ~pipe_pair() {
    ::close(read_fd);
    ::close(write_fd);
  }
  pipe_pair(const pipe_pair&) = delete;
  pipe_pair& operator=(const pipe_pair&) = delete;
  void fill() const { ASSERT_EQ(::write(write_fd, "x", 1), 1); }
};

TEST(PollSet, IndicesFollowAddAndNothingReportsBeforeTheWait) {
  pipe_pair a;
  pipe_pair b;
  a.fill();
  poll_set set;
  EXPECT_EQ(set.add(a.read_fd, POLLIN), 0u);
  EXPECT_EQ(set.add(b.read_fd, POLLIN), 1u);
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(set.revents(0), 0);
  EXPECT_EQ(set.revents(1), 0);
}

TEST(PollSet, ReportsOnlyTheReadyDescriptor) {
  pipe_pair a;
  pipe_pair b;
  b.fill();
  poll_set set;
  const std::size_t ia = set.add(a.read_fd, POLLIN);
  const std::size_t ib = set.add(b.read_fd, POLLIN);
  // No deadline: returns because b is readable.
  ASSERT_TRUE(set.wait(steady_clock::time_point::max(), steady_clock::now()));
  EXPECT_EQ(set.revents(ia), 0);
  EXPECT_EQ(set.revents(ib), POLLIN);
}

TEST(PollSet, APassedDeadlineOnlyLooks) {
  pipe_pair a;
  poll_set set;
  set.add(a.read_fd, POLLIN);
  const auto now = steady_clock::now();
  ASSERT_TRUE(set.wait(now - std::chrono::seconds(1), now));
  EXPECT_EQ(set.revents(0), 0);
}

TEST(PollSet, EndsAtItsDeadlineWithoutEvents) {
  pipe_pair a;
  poll_set set;
  set.add(a.read_fd, POLLIN);
  const auto start = steady_clock::now();
  const auto until = start + std::chrono::milliseconds(20);
  ASSERT_TRUE(set.wait(until, start));
  // The timeout is rounded up to whole milliseconds, never down: it does not end early.
  EXPECT_GE(steady_clock::now(), until);
  EXPECT_EQ(set.revents(0), 0);
}

TEST(PollSet, ClearStartsAnEmptyTurn) {
  pipe_pair a;
  a.fill();
  poll_set set;
  set.add(a.read_fd, POLLIN);
  ASSERT_TRUE(set.wait(steady_clock::time_point::max(), steady_clock::now()));
  ASSERT_EQ(set.revents(0), POLLIN);
  set.clear();
  EXPECT_EQ(set.size(), 0u);
  // A new turn reuses index 0 for whatever is added first, with no events until it waits.
  pipe_pair b;
  EXPECT_EQ(set.add(b.read_fd, POLLIN), 0u);
  EXPECT_EQ(set.revents(0), 0);
  ASSERT_TRUE(set.wait(steady_clock::now(), steady_clock::now()));
  EXPECT_EQ(set.revents(0), 0);
}

TEST(PollSet, AClosedDescriptorIsReportedNotAFailure) {
  poll_set set;
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ::close(fds[0]);
  ::close(fds[1]);
  set.add(fds[0], POLLIN);
  ASSERT_TRUE(set.wait(steady_clock::time_point::max(), steady_clock::now()));
  EXPECT_EQ(set.revents(0), POLLNVAL);
}

TEST(PollSet, TheWriteEndClosedIsHangUp) {
  poll_set set;
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ::close(fds[1]);
  set.add(fds[0], POLLIN);
  ASSERT_TRUE(set.wait(steady_clock::time_point::max(), steady_clock::now()));
  EXPECT_NE(set.revents(0) & POLLHUP, 0);
  ::close(fds[0]);
}

}  // namespace
}  // namespace spoold
