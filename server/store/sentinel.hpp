// Where a Redis primary is, as Redis Sentinel says, and word of when it moves.
//
// Finding the primary follows the Sentinel client guidelines: ask the Sentinels one after
// another (each with a short timeout) with SENTINEL get-master-addr-by-name, take the first
// address one reports, and start with that Sentinel next time. The caller then connects and
// checks with ROLE that the instance really is a primary (a Sentinel cut off from the others
// may still name an old one); the Redis store does that on every connection it makes.
//
// Hearing of a move: watch() starts a thread per Sentinel that stays subscribed to its
// "+switch-master" channel ("NAME old-ip old-port new-ip new-port"), subscribing again when the
// connection breaks or stops answering PING. Every Sentinel is heard, because they announce a
// failover at different times: the others as soon as the new primary is promoted (they learn
// it from the elected one's hello message), the elected one only once every replica has been
// reconfigured, which can be a second or more later. A switch may happen while a thread is
// not subscribed, so after each subscription it asks for the primary and reports it if it
// differs from the last one seen. A move is reported once, whichever Sentinel told of it
// first, and primary() then asks that Sentinel first. The watch only makes clients move
// sooner: a client that never hears of a switch still finds it, since a failover makes
// Sentinel disconnect the clients of every instance it reconfigures, and a demoted primary
// answers writes with READONLY.
//
// Processes forked while the watch runs (the forking server models) have no watcher threads;
// primary() keeps no lock, so a child can call it whatever a thread was doing at fork time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "store/store.hpp"

namespace spoold::store {

class sentinel_client {
 public:
  // `timeout` bounds each connect and each command round trip to a Sentinel.
  sentinel_client(std::vector<redis_endpoint> sentinels, std::string master,
                  std::chrono::milliseconds timeout);
  ~sentinel_client();  // stops the watcher threads, if any, and joins them
  sentinel_client(const sentinel_client&) = delete;
  sentinel_client& operator=(const sentinel_client&) = delete;

  // The primary's address as the first Sentinel that answers reports it. Throws no_primary,
  // with each Sentinel's answer, when none reports one. Safe from any thread.
  [[nodiscard]] redis_endpoint primary() const;
  // The primary primary() named could not be used (unreachable, or not a primary): the next
  // call asks another Sentinel first, in case the one asked has not caught up yet.
  void primary_failed() noexcept;
  // The replicas the first Sentinel that answers sees up (reachable, not failing), for reads
  // while no primary is reachable. Throws no_primary when no Sentinel answers.
  [[nodiscard]] std::vector<redis_endpoint> replicas() const;

  // Starts the watcher threads (once); on_switch(new primary) runs on one of them for every
  // move they hear of, one call at a time, and must not block for long.
  void watch(std::function<void(const redis_endpoint&)> on_switch);

  // "127.0.0.1:26379,127.0.0.2:26379/NAME"
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] const std::string& master() const noexcept { return master_; }

 private:
  // Asks the Sentinels one after another, starting with the preferred one, until `parse`
  // makes something of an answer (an empty optional: no answer, with `why` set); then that
  // Sentinel is preferred. Throws no_primary naming each Sentinel's answer.
  template <class T, class Parse>
  T ask_each(std::initializer_list<std::string_view> command, Parse parse) const;
  // A watcher thread: subscribed to sentinels_[index], again and again, until stop.
  void run_watch(std::size_t index);
  // Subscribed to sentinels_[index] until its connection fails or stop is asked; true on stop.
  bool watch_one(std::size_t index);
  // Reports `now` unless it is the primary last reported (or, with `first_look`, the first
  // primary seen at all, which is not a move). `index`: the Sentinel that said so.
  void moved_to(const redis_endpoint& now, std::size_t index, bool first_look);
  // Waits up to `ms` for stop; true if asked to stop.
  bool stop_within(std::chrono::milliseconds ms) const;

  std::vector<redis_endpoint> sentinels_;
  std::string master_;
  std::chrono::milliseconds timeout_;
  // The Sentinel that answered last, where primary() starts. A hint: any value is correct.
  mutable std::atomic<std::size_t> preferred_{0};

  std::function<void(const redis_endpoint&)> on_switch_;
  // The primary last reported by the watcher threads (seen_any_: whether there was one).
  std::mutex moves_;
  redis_endpoint last_seen_;
  bool seen_any_ = false;
  int stop_fd_ = -1;  // an eventfd, readable once the destructor asks the watchers to stop
  std::vector<std::thread> watchers_;
};

}  // namespace spoold::store
