// mutex_pool_peer.hpp: the adapter over the baseline pool (mutex_pool.hpp).
#pragma once

#include <future>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "peers/mutex_pool.hpp"
#include "peers/peer.hpp"

namespace bench {

// N threads; futures the way the conventional pools make them (std::packaged_task behind a
// shared_ptr, since std::function must be copyable).
class mutex_pool_peer : public waits_idle<mutex_pool_peer, mutex_pool> {
 public:
  static constexpr std::string_view name = "mutex_pool";
  static constexpr std::string_view no_fork_join = blocking_wait_deadlocks;

  explicit mutex_pool_peer(unsigned threads) : waits_idle(threads) {}

  template <class F>
  auto submit(F&& f) {
    using result = std::invoke_result_t<std::decay_t<F>>;
    auto task = std::make_shared<std::packaged_task<result()>>(std::forward<F>(f));
    auto future = task->get_future();
    pool_.post([task] { (*task)(); });
    return future;
  }
};

}  // namespace bench
