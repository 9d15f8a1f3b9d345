// fib_common.hpp: what the fib and coro experiments share: a timed fib call that checks its
// value, and a peer's fork/join fib as a contender.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "workload/fib.hpp"

namespace bench {

// Wall milliseconds of compute(), which must return fib's expected value.
sample timed_ms(std::int64_t expected, std::string_view who, auto&& compute) {
  const auto t0 = steady::now();
  const std::int64_t got = compute();
  const double ms = seconds_since(t0) * 1e3;
  check(got == expected, std::string(who) + ": fib computed a wrong value");
  return {ms, {}};
}

// P's fork_join fib (spool: parallel_invoke; oneTBB: a task_group), n/a for a peer without
// fork/join. The root is a task too, so every call waits inside a task.
template <class P>
contender fork_join_fib(const std::string& variant, unsigned threads, int n, int cutoff,
                        std::int64_t expected) {
  if constexpr (!P::no_fork_join.empty()) {
    return not_available(variant, P::name, P::no_fork_join);
  } else {
    return contender{
        variant, std::string(P::name), {}, fresh_run<P>(threads, [=](P& p) {
          return timed_ms(expected, P::name, [&] {
            std::int64_t result = 0;
            p.run_and_wait([&] { p.post([&] { result = fib::fork_join(p, n, cutoff); }); });
            return result;
          });
        })};
  }
}

}  // namespace bench
