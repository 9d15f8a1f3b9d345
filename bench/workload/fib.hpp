// fib.hpp: nested fork/join: every call at or above the cutoff makes fib(n-1) a task,
// computes fib(n-2) itself, and waits for the task inside its own task.
#pragma once

#include <cstdint>

namespace bench::fib {

std::int64_t serial(int n);

template <class Peer>
std::int64_t fork_join(Peer& peer, int n, int cutoff) {
  if (n < cutoff) return serial(n);
  std::int64_t child = 0, here = 0;
  peer.fork_join([&] { child = fork_join(peer, n - 1, cutoff); },
                 [&] { here = fork_join(peer, n - 2, cutoff); });
  return child + here;
}

}  // namespace bench::fib
