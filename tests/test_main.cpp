// Test entry point with a watchdog: a test that hangs (a lost wake-up, a deadlock) fails the run
// with a message and a core-dumping abort instead of stalling CI until its time limit.
// SPOOL_TEST_WATCHDOG_S overrides the limit (seconds, default 300). The limit applies to each
// test case: the clock restarts when a case starts, so a binary of several long stress cases
// under a sanitizer on a loaded machine is not taken for a hang while each case still finishes.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace {

class watchdog : public ::testing::EmptyTestEventListener {
 public:
  explicit watchdog(std::chrono::seconds limit)
      : limit_(limit), deadline_(std::chrono::steady_clock::now() + limit), thread_([this] {
          std::unique_lock lock(mu_);
          while (!done_) {
            if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && !done_ &&
                std::chrono::steady_clock::now() >= deadline_) {
              std::fprintf(stderr, "watchdog: %s ran past %llds; assuming a hang\n",
                           current_.empty() ? "the test binary" : current_.c_str(),
                           static_cast<long long>(limit_.count()));
              std::abort();
            }
          }
        }) {}

  ~watchdog() override {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard lock(mu_);
    current_ = std::string(info.test_suite_name()) + "." + info.name();
    deadline_ = std::chrono::steady_clock::now() + limit_;
  }

 private:
  const std::chrono::seconds limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string current_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;  // last: it reads the fields above
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  long limit = 300;
  if (const char* s = std::getenv("SPOOL_TEST_WATCHDOG_S")) limit = std::atol(s);
  // Appended, the listener list would own the watchdog and delete it only at exit; its thread
  // must be joined before main returns, so it is released back after the run.
  watchdog dog{std::chrono::seconds(limit)};
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  listeners.Append(&dog);
  const int rc = RUN_ALL_TESTS();
  listeners.Release(&dog);
  return rc;
}
