// Helpers the behaviour tests share.
#pragma once

#include <spool/spool.hpp>

#include <atomic>
#include <cstddef>
#include <latch>
#include <optional>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

namespace spool_test {

// A config with `threads` workers, the given bound and policy, and every other field at its
// default. (Designated initializers that leave fields out trip g++ 12's
// -Wmissing-field-initializers in the tests' -Werror build.)
inline spool::config pool_config(unsigned threads, std::size_t capacity = 0,
                                 spool::full_policy on_full = spool::full_policy::block) {
  spool::config cfg;
  cfg.threads = threads;
  cfg.queue_capacity = capacity;
  cfg.on_full = on_full;
  return cfg;
}

// The error code a call throws as spool::error, or an empty code if it does not throw.
template <class F>
std::error_code error_code_of(F&& f) {
  try {
    f();
  } catch (const spool::error& e) {
    return e.code();
  }
  return {};
}

// f.get() from a thread of its own. The thread that submitted a task may run it itself when
// its get() finds it still queued (src/README.md, "An outside waiter runs its own task"); a
// test whose task must run on a worker waits from another thread, which never does.
template <class T>
T get_elsewhere(spool::future<T>& f) {
  if constexpr (std::is_void_v<T>) {
    std::thread waiter([&f] { f.get(); });
    waiter.join();
  } else {
    std::optional<T> result;
    std::thread waiter([&f, &result] { result.emplace(f.get()); });
    waiter.join();
    return std::move(*result);
  }
}
template <class T>
T get_elsewhere(spool::future<T>&& f) {
  return get_elsewhere(f);
}

// Runs an empty task on a worker of `p` and returns once it ran; that worker parks after it if
// nothing else is queued. Waits on a latch, not a future: an outside thread's get() may take
// its own task back (as above), and then no worker runs it or parks after it.
inline void run_on_a_worker(spool::pool& p) {
  std::latch ran{1};
  p.post([&ran] { ran.count_down(); });
  ran.wait();
}

// Occupies every worker of `p` with a task that waits at `release` (a std::latch, or a gate
// declared after the pool so that an early return lets the workers go); returns once all of
// them are running, so nothing is queued. `started` must count p.thread_count().
template <class Release>
void hold_workers(spool::pool& p, std::latch& started, const Release& release) {
  for (std::size_t i = 0; i < p.thread_count(); ++i) {
    p.post([&] {
      started.count_down();
      release.wait();
    });
  }
  started.wait();
}

// A latch of one that tasks wait at, opened by open() or, at the latest, by its destructor.
// Declared after the pool whose tasks wait at it, it is destroyed first: a test that returns
// early (a failed ASSERT) lets the blocked tasks finish, and the pool's destructor does not
// wait for them forever.
class gate {
 public:
  gate() = default;
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;
  ~gate() { open(); }

  void wait() const { latch_.wait(); }
  void open() {
    if (!opened_.exchange(true)) latch_.count_down();
  }

 private:
  mutable std::latch latch_{1};
  std::atomic<bool> opened_{false};
};

// Counts its own destruction, once however often it is moved: a callable holding one proves
// that the pool released that callable exactly once, whether it ran, was skipped, dropped or
// refused.
class release_counter {
 public:
  explicit release_counter(std::atomic<int>& n) : n_(&n) {}
  release_counter(release_counter&& other) noexcept : n_(std::exchange(other.n_, nullptr)) {}
  release_counter& operator=(release_counter&&) = delete;
  ~release_counter() {
    if (n_ != nullptr) ++*n_;
  }

 private:
  std::atomic<int>* n_;
};

}  // namespace spool_test
