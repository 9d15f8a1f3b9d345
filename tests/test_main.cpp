// Test entry point with a watchdog: a test that hangs (a lost wake-up, a deadlock) fails the run
// with a message and a core-dumping abort instead of stalling CI until its time limit.
// SPOOL_TEST_WATCHDOG_S overrides the limit (seconds, default 300).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace {

class watchdog {
 public:
  explicit watchdog(std::chrono::seconds limit)
      : thread_([this, limit] {
          std::unique_lock lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: the test binary ran past %llds; assuming a hang\n",
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  long limit = 300;
  if (const char* s = std::getenv("SPOOL_TEST_WATCHDOG_S")) limit = std::atol(s);
  watchdog dog{std::chrono::seconds(limit)};
  return RUN_ALL_TESTS();
}
