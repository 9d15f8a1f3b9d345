// asio_peer.hpp: Boost.Asio's thread_pool with post().
#pragma once

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include <string_view>
#include <type_traits>
#include <utility>

#include "peers/peer.hpp"

namespace bench {

// thread_pool(N): N threads. Its own wait (join) ends the pool, so completion of posted work is
// tracked with a completion_counter; futures come from asio's use_future (a std::future).
class asio_peer {
 public:
  static constexpr std::string_view name = "asio";
  static constexpr std::string_view no_future{};
  static constexpr std::string_view no_fork_join = blocking_wait_deadlocks;
  static constexpr std::string_view no_round_trip{};
  static constexpr std::string_view no_outside_producer{};

  explicit asio_peer(unsigned threads) : pool_(threads) {}

  template <class F>
  void post(F&& f) {
    pending_.add();
    boost::asio::post(pool_, [this, fn = std::decay_t<F>(std::forward<F>(f))]() mutable {
      fn();
      pending_.done();
    });
  }
  template <class F>
  void run_and_wait(F&& f) {
    f();
    pending_.wait();
  }
  template <class F>
  auto submit(F&& f) {
    return boost::asio::post(pool_, boost::asio::use_future(std::forward<F>(f)));
  }
  template <class F>
  void round_trip(F&& f) {
    submit(std::forward<F>(f)).get();
  }

 private:
  completion_counter pending_;
  boost::asio::thread_pool pool_;  // last: its destructor joins the threads first
};

}  // namespace bench
