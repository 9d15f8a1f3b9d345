// What the queue's tests share: a real redis-server per test (tests/server/redis_fixture.hpp),
// a raw connection to look at and tamper with the queue's keys, and a bounded wait for a
// condition another process or thread brings about.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/redis_fixture.hpp"
#include "spool/queue.hpp"

namespace queue_test {

using namespace std::chrono_literals;
using spoold_test::redis_client;
using spoold_test::redis_server;

// Polls `done` until it holds or `limit` passes (a bound, not a pace); true if it held.
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 30s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// The errc a call throws as spool::queue::error; errc{} if it throws nothing.
template <class F>
spool::queue::errc error_of(F&& f) {
  try {
    f();
  } catch (const spool::queue::error& e) {
    return e.value();
  }
  return spool::queue::errc{};
}

// What a call throws as spool::queue::error, in words ("" if nothing).
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const spool::queue::error& e) {
    return e.what();
  }
  return {};
}

class queue_test_base : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string binary = spoold_test::find_redis_server();
    ASSERT_FALSE(binary.empty()) << "redis-server is not on PATH (scripts/install-deps.sh)";
    redis_ = std::make_unique<redis_server>(binary);
  }

  [[nodiscard]] std::string url() const { return redis_->spec(); }
  redis_client raw() const { return redis_client(redis_->port()); }
  redis_server& server() { return *redis_; }

  // A worker's options with short times, so that tests of leases run in seconds.
  static spool::queue::worker_options fast_worker(const std::string& queue, unsigned threads) {
    spool::queue::worker_options o;
    o.queue = queue;
    o.threads = threads;
    o.lease = 1500ms;
    o.check_interval = 100ms;
    o.drain_timeout = 5s;
    o.on_log = [](std::string_view) {};  // the tests cause trouble on purpose
    return o;
  }

  spool::queue::job_status status(const std::string& id) {
    return spool::queue::admin(url()).status(id);
  }
  spool::queue::queue_stats stats(const std::string& queue) {
    return spool::queue::admin(url()).stats(queue);
  }

 private:
  std::unique_ptr<redis_server> redis_;
};

// The number of a job id "QUEUE/N": N, as the functions take it.
inline std::string number_of(const std::string& id) { return id.substr(id.find('/') + 1); }

// The text of a reply, or its integer.
inline std::string text(const redisReply& r) {
  if (r.type == REDIS_REPLY_INTEGER) return std::to_string(r.integer);
  return r.str != nullptr ? std::string(r.str, r.len) : std::string();
}

// A library under the queue's name, as another spool build would have loaded it: its
// spool_version answers `version`, or it has none at all.
inline void load_another_build(redis_client& r, const std::string& version) {
  const std::string code =
      "#!lua name=spool_queue\n" +
      (version.empty()
           ? std::string("redis.register_function('spool_other', function() return 1 end)\n")
           : "redis.register_function{function_name = 'spool_version', callback = function() "
             "return '" +
                 version + "' end, flags = {'no-writes'}}\n");
  const auto loaded = r.command({"FUNCTION", "LOAD", code});
  ASSERT_EQ(loaded->type, REDIS_REPLY_STRING) << text(*loaded);
}

}  // namespace queue_test
