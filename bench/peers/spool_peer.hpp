// spool_peer.hpp: spool::pool, the library under test.
#pragma once

#include <spool/parallel.hpp>
#include <spool/spool.hpp>

#include <cstddef>
#include <string_view>
#include <utility>

#include "peers/peer.hpp"

namespace bench {

// N workers; the calling thread is not one of them: it submits, then blocks in wait_idle() or
// future::get(). A task that waits on a future runs other tasks meanwhile (help-while-wait).
class spool_peer : public waits_idle<spool_peer, spool::pool> {
 public:
  static constexpr std::string_view name = "spool";

  explicit spool_peer(unsigned threads) : waits_idle(make_config(threads)) {}
  // A pool of another shape (elastic sizing), its configuration taken as it is.
  explicit spool_peer(spool::config cfg) : waits_idle(std::move(cfg)) {}

  // config::spin_rounds for the pools made from here on (spool-bench --spin-rounds).
  static inline unsigned spin_rounds = spool::config{}.spin_rounds;
  // config::defer_period likewise (spool-bench --defer-period).
  static inline std::chrono::microseconds defer_period = spool::config{}.defer_period;

  // spool's bulk submission: n tasks calling f(i), submitted in one call (pool.post_n: the
  // workers share one copy of f and take the indices in chunks). Inside run_and_wait().
  template <class F>
  void bulk(std::size_t n, const F& f) {
    pool_.post_n(n, f);
  }
  template <class F>
  auto submit(F&& f) {
    return pool_.submit(std::forward<F>(f));
  }
  // spool's fork/join: the child goes onto this worker's own deque from this frame (no
  // allocation), here() runs, and the worker takes the child back or, if it was stolen, runs
  // other tasks until it is done.
  template <class Child, class Here>
  void fork_join(Child&& child, Here&& here) {
    spool::parallel_invoke(pool_, here, child);
  }

  // The pool itself, for the library's algorithms (spool::parallel_sort in quicksort).
  spool::pool& native() noexcept { return pool_; }
  const spool::pool& native() const noexcept { return pool_; }

 private:
  static spool::config make_config(unsigned threads) {
    spool::config cfg;
    cfg.threads = threads;
    cfg.name = "bench";
    cfg.spin_rounds = spin_rounds;
    cfg.defer_period = defer_period;
    return cfg;
  }
};

}  // namespace bench
