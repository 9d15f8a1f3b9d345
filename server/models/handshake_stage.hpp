// The queue model's TLS handshakes, on one thread of their own (README.md, "TLS"). A pool
// worker serves a connection for its whole life, blocking on its socket; were the handshake part
// of that, a client slow to handshake (or one that never does) would hold a worker for up to
// --header-timeout. The stage drives every pending handshake without blocking in one poll() set
// and hands the pool a connection only once its handshake has ended.
//
// Failed handshakes are counted by reason as everywhere else; plain HTTP gets the same
// plaintext 400 as in the other models, after which the stage reads the client's bytes away
// until it closes (at most linger_time), so that closing does not reset the answer away.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "conn/listener.hpp"
#include "event/stop_signal.hpp"
#include "event/wakeup.hpp"
#include "server_context.hpp"

namespace spoold {

class tls_transport;

class handshake_stage {
 public:
  // `ready`: a connection whose handshake has ended (a.ssl set), on the stage's thread.
  // `dropped`: a connection the stage closed (failed, timed out, or pending at the stop); the
  // model gives back what it counted for it.
  handshake_stage(server_context& ctx, const stop_signal& stop,
                  std::function<void(accepted&&)> ready, std::function<void()> dropped);
  ~handshake_stage();
  handshake_stage(const handshake_stage&) = delete;
  handshake_stage& operator=(const handshake_stage&) = delete;

  // Throws std::system_error.
  void start();
  // Takes an accepted TLS socket; any thread. After the stop it is dropped at once.
  void add(accepted&& a);
  // Returns once the thread has ended (after the stop); every connection handed to add() has
  // gone to `ready` or `dropped` by then.
  void join();

 private:
  struct pending;

  void run();
  void take_incoming(steady_clock::time_point now);
  // Moves `p` on; false once it has left the stage.
  bool progress(pending& p, short revents, steady_clock::time_point now);
  void drop(pending& p) noexcept;
  // Gives back what `a` holds (its client's count, its socket) and tells `dropped`.
  void discard(accepted& a) noexcept;

  server_context& ctx_;
  const stop_signal& stop_;
  std::function<void(accepted&&)> ready_;
  std::function<void()> dropped_;
  std::optional<wakeup> wake_;  // made by start(): incoming_ grew
  std::mutex mu_;
  std::vector<accepted> incoming_;  // guarded by mu_
  bool closed_ = false;             // guarded by mu_: the thread has ended, add() drops
  std::vector<std::unique_ptr<pending>> pending_;  // the stage's thread only
  std::thread thread_;
};

}  // namespace spoold
