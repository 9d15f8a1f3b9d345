// asio_peer.hpp: Boost.Asio's thread_pool with post().
#pragma once

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include <string_view>
#include <utility>

#include "peers/peer.hpp"

namespace bench {

// thread_pool(N): N threads. Its own wait (join) ends the pool, so completion of posted work is
// tracked by counting the tasks (counted_posts); futures come from asio's use_future (a
// std::future).
class asio_peer : public counted_posts<asio_peer> {
 public:
  static constexpr std::string_view name = "asio";
  static constexpr std::string_view no_fork_join = blocking_wait_deadlocks;

  explicit asio_peer(unsigned threads) : pool_(threads) {}

  template <class F>
  void post(F&& f) {
    boost::asio::post(pool_, counted(std::forward<F>(f)));
  }
  template <class F>
  auto submit(F&& f) {
    return boost::asio::post(pool_, boost::asio::use_future(std::forward<F>(f)));
  }

 private:
  boost::asio::thread_pool pool_;  // its destructor joins the threads before the count goes
};

}  // namespace bench
