// The listening side every model shares: the listening socket (bound once, from --bind and
// --port), accepting with one classification of accept()'s errors, and the per-client count of
// every accepted connection (a client past its limit is refused here, limits/refusal.hpp).
#pragma once

#include <chrono>
#include <cstdint>

#include "conn/accepted.hpp"
#include "server_context.hpp"

namespace spoold {

enum class accept_outcome {
  accepted,   // `out` holds a new connection
  empty,      // nothing pending (non-blocking listener)
  exhausted,  // out of descriptors or memory: pending connections wait in the backlog; the
              // caller pauses accepting for accept_pause and tries again. Counted in
              // /metrics, and reported on stderr at most once per second per process
  failed,     // the listener was shut down (how shut_down() wakes a blocking accept()), or
              // accept() failed otherwise (reported on stderr): a blocking model stops
              // accepting; an event loop, which never shuts its listener down, pauses as for
              // `exhausted`
};

// How long a model stops accepting after `exhausted`.
inline constexpr std::chrono::milliseconds accept_pause{100};

class listener {
 public:
  listener() = default;
  ~listener() { close(); }
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;

  // Binds --bind:--port (the port the first listener of a model got, for the next ones). With
  // `blocking`, accept() waits for a connection (the models that block in it); otherwise it
  // returns `empty` (event loops). `reuse_port`: SO_REUSEPORT, one listener per event loop.
  // Exhausted accepts are counted into ctx.counters. `tls`: every connection accepted here
  // speaks TLS with ctx.tls (which must be set). Throws std::system_error.
  void open(server_context& ctx, std::uint16_t port, bool blocking, bool reuse_port = false,
            bool tls = false);
  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

  // One accept(). Interrupted and aborted accepts are retried inside; errors that will not pass
  // are reported on stderr (all but the EINVAL of a shut-down listener). A connection past
  // --max-connections-per-client is refused with 429 here, and accept() goes on to the next:
  // every model accepts through this, so every model counts and refuses alike.
  accept_outcome accept(accepted& out) noexcept;

  // Accepts up to `max` pending connections without waiting, handing each to
  // on_accept(accepted&&), which owns it from then on. Returns `accepted` if it stopped at `max`
  // (more may be pending), else the outcome that stopped it.
  template <class OnAccept>
  accept_outcome accept_pending(int max, OnAccept&& on_accept) {
    for (int i = 0; i < max; ++i) {
      accepted a;
      const accept_outcome got = accept(a);
      if (got != accept_outcome::accepted) return got;
      on_accept(std::move(a));
    }
    return accept_outcome::accepted;
  }

  // Refuses new connections and wakes every accept() blocked on this socket, in this process
  // and in forked children (Linux fails them with EINVAL); the descriptor stays open.
  void shut_down() noexcept;
  void close() noexcept;

 private:
  // Counts `a` for its client; false, with `a` refused (429), past the client's limit.
  bool admit_client(accepted& a) noexcept;

  int fd_ = -1;
  std::uint16_t port_ = 0;
  server_context* ctx_ = nullptr;
  tls_context* tls_ = nullptr;
};

// How many connections a listening model accepts per turn of its loop: a burst of new
// connections cannot starve the requests of established ones.
inline constexpr int accepts_per_turn = 64;

}  // namespace spoold
