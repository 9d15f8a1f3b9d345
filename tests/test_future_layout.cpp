// A future's state (spool/detail/future_state.hpp): its size, and its result slot, where the
// value and the exception share storage.
//  - Size: task memory comes in power-of-two classes, and the submit path's cost follows the
//    class, so a future task of a small result around a small callable must stay in the
//    64-byte class. The state's layout note says how the fields are packed for that.
//  - Result slot: for every kind of result (a value with a destructor, a reference, void)
//    a value, an exception, and neither (a result never read, or a task cancelled before it
//    ran) are each destroyed once; AddressSanitizer's leak check and its use-after-free
//    detection see the string and exception objects.
#include <spool/coro.hpp>
#include <spool/spool.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <latch>
#include <stdexcept>
#include <string>

#include "memory/size_classes.hpp"
#include "support.hpp"

namespace {

using spool::detail::future_task;
namespace memory = spool::detail::memory;

struct capture_nothing {
  int operator()() const { return 1; }
};
struct capture_pointer {
  const int* p;
  int operator()() const { return *p; }
};
struct capture_pointer_void {
  const int* p;
  void operator()() const {}
};

constexpr std::size_t block_of(std::size_t size) {
  return memory::block_size(memory::class_of(size));
}

TEST(FutureLayout, SmallFutureTasksFitTheSixtyFourByteClass) {
  if constexpr (sizeof(void*) != 8) GTEST_SKIP() << "the layout note is for 64-bit targets";
  EXPECT_EQ(block_of(sizeof(future_task<capture_nothing, int>)), 64u);
  EXPECT_EQ(block_of(sizeof(future_task<capture_pointer, int>)), 64u);
  EXPECT_EQ(block_of(sizeof(future_task<capture_pointer_void, void>)), 64u);
}

// A coroutine's resumption lives in the awaiter, in the frame: its size decides the frame's
// class (spool::start's root frame for an int64_t task is 120 bytes with it, 128-byte class).
TEST(FutureLayout, CoroutineResumptionFitsTheTasksTail) {
  if constexpr (sizeof(void*) != 8) GTEST_SKIP() << "the layout note is for 64-bit targets";
  EXPECT_EQ(sizeof(spool::detail::resume_task), 40u);
}

TEST(ResultSlot, ValueWithADestructorIsMovedOutOnce) {
  spool::pool p(spool_test::pool_config(2));
  auto f = p.submit([] { return std::string(100, 'v'); });
  EXPECT_EQ(f.get(), std::string(100, 'v'));
}

TEST(ResultSlot, ValueNeverReadIsDestroyedWithTheState) {
  spool::pool p(spool_test::pool_config(2));
  {
    auto f = p.submit([] { return std::string(100, 'v'); });
    f.wait();
  }  // the future goes without get(): the state destroys the string
  auto s = p.submit([] { return std::string(100, 's'); }).share();
  EXPECT_EQ(s.get(), std::string(100, 's'));
  EXPECT_EQ(s.get(), std::string(100, 's'));  // peek leaves it in place
}

TEST(ResultSlot, ExceptionReadOrNotIsDestroyedOnce) {
  spool::pool p(spool_test::pool_config(2));
  auto f = p.submit([]() -> std::string { throw std::runtime_error("taken"); });
  EXPECT_THROW(f.get(), std::runtime_error);
  {
    auto g = p.submit([]() -> std::string { throw std::runtime_error("left"); });
    g.wait();
  }
  auto s = p.submit([]() -> std::string { throw std::runtime_error("shared"); }).share();
  EXPECT_THROW(s.get(), std::runtime_error);
  EXPECT_THROW(s.get(), std::runtime_error);
}

TEST(ResultSlot, ReferenceAndVoidResults) {
  spool::pool p(spool_test::pool_config(2));
  int target = 5;
  auto r = p.submit([&target]() -> int& { return target; });
  EXPECT_EQ(&r.get(), &target);
  auto v = p.submit([] {});
  v.get();
  auto failed = p.submit([]() -> int& { throw std::runtime_error("ref"); });
  EXPECT_THROW(failed.get(), std::runtime_error);
  auto failed_void = p.submit([] { throw std::runtime_error("void"); });
  EXPECT_THROW(failed_void.get(), std::runtime_error);
}

TEST(ResultSlot, CancelledBeforeItRanHoldsTheCancellation) {
  spool::pool p(spool_test::pool_config(1));
  std::latch started(1);
  std::latch release(1);
  auto blocker = p.submit([&] {  // holds the only worker
    started.count_down();
    release.wait();
  });
  started.wait();
  auto queued = p.submit([] { return std::string(100, 'q'); });
  ASSERT_TRUE(queued.cancel());
  release.count_down();
  blocker.get();
  EXPECT_THROW(queued.get(), spool::task_cancelled);
}

TEST(ResultSlot, PromiseOfEveryKind) {
  spool::pool p(spool_test::pool_config(1));
  spool::promise<std::string> s(p);
  auto fs = s.get_future();
  s.set_value(std::string(100, 'p'));
  EXPECT_EQ(fs.get(), std::string(100, 'p'));

  int target = 0;
  spool::promise<int&> r(p);
  auto fr = r.get_future();
  r.set_value(target);
  EXPECT_EQ(&fr.get(), &target);

  spool::promise<std::string> e(p);
  auto fe = e.get_future().share();
  e.set_exception(std::make_exception_ptr(std::runtime_error("promised")));
  EXPECT_THROW(fe.get(), std::runtime_error);
  EXPECT_THROW(fe.get(), std::runtime_error);
}

}  // namespace
