// omp_peer.hpp: OpenMP tasks (parallel + single + task + taskwait), gcc's libgomp.
#pragma once

#include <omp.h>

#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

#include "peers/peer.hpp"

namespace bench {

// A team of N threads (num_threads(N), dynamic adjustment off). The caller of run_and_wait()
// becomes one of them: it runs the posting code in `single` while the others take the tasks,
// then works in the closing barrier. Tasks exist only inside that region, hence no
// outside producer and no future.
class omp_peer : public peer_base<omp_peer> {
 public:
  static constexpr std::string_view name = "omp";
  static constexpr std::string_view no_future =
      "OpenMP tasks have no future: completion is seen only at taskwait or a barrier";
  static constexpr std::string_view no_outside_producer =
      "tasks can be created only by the team inside a parallel region, and libgomp runs them "
      "inline once 64 per thread are queued: no throttled outside producer";

  explicit omp_peer(unsigned threads) : threads_(static_cast<int>(threads)) { omp_set_dynamic(0); }

  template <class F>
  void post(F&& f) {
    std::decay_t<F> fn(std::forward<F>(f));
#pragma omp task firstprivate(fn)
    fn();
  }
  // OpenMP's bulk task creation: a taskloop of n iterations calling f(i), inside
  // run_and_wait() (libgomp's default splits it into about one task per thread).
  template <class F>
  void bulk(std::size_t n, const F& f) {
#pragma omp taskloop
    for (std::size_t i = 0; i < n; ++i) f(i);
  }
  template <class F>
  void run_and_wait(F&& f) {
    // The barrier that closes `single` completes every task of the team, descendants included.
#pragma omp parallel num_threads(threads_)
    {
#pragma omp single
      f();
    }
  }
  // One parallel region per round trip: the team wakes, one thread runs the task, all meet
  // at the barrier. That is what handing one task to OpenMP from serial code costs.
  template <class F>
  void round_trip(F&& f) {
    run_and_wait([&] { post(f); });
  }
  template <class Child, class Here>
  void fork_join(Child&& child, Here&& here) {
#pragma omp task default(shared)
    child();
    here();
#pragma omp taskwait
  }

 private:
  int threads_;
};

}  // namespace bench
