// Where refused connections go. A connection turned away (past --max-connections, or when
// nothing can take it; past --max-connections-per-client, with 429 instead) is answered 503 with
// Connection: close and then lingers like every connection after its last answer (connection.hpp):
// its sending side is shut and what the client sent is read away until the client closes, so that
// the client reads the answer and an end-of-file instead of a reset. The refusing thread (an event
// loop, an acceptor, a worker) writes the answer and hands the socket over; one thread of this
// object lingers on every refused socket, so no thread that accepts or serves waits on a refused
// client, and a refused connection holds no place in any --max-connections budget.
//
// Bounds: at most `capacity` refused connections linger at once, each for at most the linger
// time (a connection's deadline); past the capacity a refusal is answered and closed at once.
// The thread starts with the first refusal, in the process that refuses: a worker of
// `preforked` starts its own. A process forked after the thread started (a child of
// `forking`, which never refuses) closes its refusals at once.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "conn/accepted.hpp"
#include "conn/connection.hpp"
#include "conn/inline_driver.hpp"
#include "event/stop_signal.hpp"
#include "event/wakeup.hpp"
#include "server_context.hpp"

namespace spoold {

class refusals {
 public:
  static constexpr std::size_t default_capacity = 1024;

  explicit refusals(server_context& ctx, std::size_t capacity = default_capacity);
  ~refusals();  // closes the connections still lingering (in the process that runs the thread)
  refusals(const refusals&) = delete;
  refusals& operator=(const refusals&) = delete;

  // Answers `a` (503 or 429, by `why`) and takes its socket. False, with the socket still `a`'s,
  // when no more can linger now.
  bool take(accepted&& a, refusal_reason why) noexcept;

 private:
  void start_locked();
  void run();
  void wake() const noexcept;

  server_context& ctx_;
  std::size_t capacity_;
  stop_signal never_raised_;  // the driver's: a refusal has no request to finish at a stop
  inline_driver driver_;      // never asked to run a job: a refused connection does not parse
  std::atomic<std::size_t> lingering_{0};  // taken and not yet closed
  std::mutex mu_;
  std::vector<std::unique_ptr<connection>> incoming_;  // guarded by mu_: taken, not yet polled
  bool done_ = false;                                  // guarded by mu_
  pid_t thread_pid_ = 0;        // guarded by mu_: the process that runs thread_; 0: none yet
  std::optional<wakeup> wake_;  // made with the thread: incoming_ grew, or done_
  std::thread thread_;
};

}  // namespace spoold
