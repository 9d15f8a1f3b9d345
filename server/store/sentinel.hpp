// Where a Redis primary is, as Redis Sentinel says, and word of when it moves.
//
// Finding the primary follows the Sentinel client guidelines: ask the Sentinels one after
// another (each with a short timeout) with SENTINEL get-master-addr-by-name, take the first
// address one reports, and start with that Sentinel next time. The caller then connects and
// checks with ROLE that the instance really is a primary (a Sentinel cut off from the others
// may still name an old one); the Redis store does that on every connection it makes.
//
// Hearing of a move: watch() starts a thread that stays subscribed to the "+switch-master"
// channel of one Sentinel at a time ("NAME old-ip old-port new-ip new-port" once a failover
// completes), moving on to the next Sentinel when its connection breaks or stops answering
// PING. A switch may happen while the thread is between Sentinels, so after each subscription
// it asks for the primary and reports it if it differs from the last one it saw. The watch only
// makes clients move sooner: a client that never hears of a switch still finds it, since a
// failover makes Sentinel disconnect the clients of every instance it reconfigures, and a
// demoted primary answers writes with READONLY.
//
// Processes forked while the watch runs (the forking server models) have no watcher thread;
// primary() keeps no lock, so a child can call it whatever the thread was doing at fork time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "store/store.hpp"

namespace spoold::store {

class sentinel_client {
 public:
  // `timeout` bounds each connect and each command round trip to a Sentinel.
  sentinel_client(std::vector<redis_endpoint> sentinels, std::string master,
                  std::chrono::milliseconds timeout);
  ~sentinel_client();  // stops the watcher thread, if any, and joins it
  sentinel_client(const sentinel_client&) = delete;
  sentinel_client& operator=(const sentinel_client&) = delete;

  // The primary's address as the first Sentinel that answers reports it. Throws no_primary,
  // with each Sentinel's answer, when none reports one. Safe from any thread.
  [[nodiscard]] redis_endpoint primary() const;

  // Starts the watcher thread (once); on_switch(new primary) runs on it for every move it
  // hears of, and must not block for long.
  void watch(std::function<void(const redis_endpoint&)> on_switch);

  // "127.0.0.1:26379,127.0.0.2:26379/NAME"
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] const std::string& master() const noexcept { return master_; }

 private:
  void run_watch();
  // Subscribed to sentinels_[index] until its connection fails or stop is asked; true on stop.
  bool watch_one(std::size_t index, redis_endpoint& last_seen, bool& seen_any);
  // Waits up to `ms` for stop; true if asked to stop.
  bool stop_within(std::chrono::milliseconds ms) const;

  std::vector<redis_endpoint> sentinels_;
  std::string master_;
  std::chrono::milliseconds timeout_;
  // The Sentinel that answered last, where primary() starts. A hint: any value is correct.
  mutable std::atomic<std::size_t> preferred_{0};

  std::function<void(const redis_endpoint&)> on_switch_;
  int stop_fd_ = -1;  // an eventfd, readable once the destructor asks the watcher to stop
  std::thread watcher_;
};

}  // namespace spoold::store
