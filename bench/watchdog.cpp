#include "watchdog.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "progress.hpp"

namespace bench {

namespace {

using steady = std::chrono::steady_clock;

// The watchdog never wakes periodically at a short interval (the idle experiment counts
// wake-ups): it sleeps until the armed deadline, or for a whole limit when nothing is armed,
// since anything armed meanwhile is due no sooner than that.
class watchdog {
 public:
  explicit watchdog(std::chrono::seconds limit) : limit_(limit) {
    std::thread([this] { watch(); }).detach();  // lives as long as the process
  }
  void arm(std::string what) {
    std::lock_guard lock(mutex_);
    what_ = std::move(what);
    deadline_ = steady::now() + limit_;
  }
  void disarm() {
    std::lock_guard lock(mutex_);
    deadline_ = steady::time_point::max();
  }

 private:
  void watch() {
    for (;;) {
      steady::time_point wake;
      {
        std::lock_guard lock(mutex_);
        if (deadline_ != steady::time_point::max() && steady::now() >= deadline_) {
          std::fprintf(stderr,
                       "%s: %s has not finished after %lld s: stuck (deadlock or lost wake-up?)\n",
                       program_name(), what_.c_str(), static_cast<long long>(limit_.count()));
          std::_Exit(4);
        }
        wake = deadline_ == steady::time_point::max() ? steady::now() + limit_ : deadline_;
      }
      std::this_thread::sleep_until(wake);
    }
  }

  const std::chrono::seconds limit_;
  std::mutex mutex_;
  std::string what_;
  steady::time_point deadline_ = steady::time_point::max();
};

watchdog* the_watchdog = nullptr;  // set once by start_watchdog(); never destroyed

}  // namespace

void start_watchdog(std::chrono::seconds limit) {
  if (the_watchdog == nullptr) the_watchdog = new watchdog(limit);
}

void watched(const std::string& what, const std::function<void()>& body) {
  if (the_watchdog) the_watchdog->arm(what);
  body();
  if (the_watchdog) the_watchdog->disarm();
}

void forget_watchdog_after_fork() { the_watchdog = nullptr; }

}  // namespace bench
