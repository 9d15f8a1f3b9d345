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
class mutex_pool_peer {
 public:
  static constexpr std::string_view name = "mutex_pool";
  static constexpr std::string_view no_future{};
  static constexpr std::string_view no_fork_join = blocking_wait_deadlocks;
  static constexpr std::string_view no_round_trip{};
  static constexpr std::string_view no_outside_producer{};

  explicit mutex_pool_peer(unsigned threads) : pool_(threads) {}

  template <class F>
  void post(F&& f) {
    pool_.post(std::forward<F>(f));
  }
  template <class F>
  void run_and_wait(F&& f) {
    f();
    pool_.wait_idle();
  }
  template <class F>
  auto submit(F&& f) {
    using result = std::invoke_result_t<std::decay_t<F>>;
    auto task = std::make_shared<std::packaged_task<result()>>(std::forward<F>(f));
    auto future = task->get_future();
    pool_.post([task] { (*task)(); });
    return future;
  }
  template <class F>
  void round_trip(F&& f) {
    submit(std::forward<F>(f)).get();
  }

 private:
  mutex_pool pool_;
};

}  // namespace bench
