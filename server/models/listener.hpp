// The listening side every model shares: the listening socket (bound once, from --bind and
// --port), accepting with one classification of accept()'s errors, the per-client count of
// every accepted connection, and the answers that refuse a connection: 503 past
// --max-connections or when nothing can take it, 429 past --max-connections-per-client.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <openssl/ssl.h>

#include "models/client_limits.hpp"
#include "models/model.hpp"
#include "net.hpp"

namespace spoold {

// A socket accept() returned: non-blocking and close-on-exec, owned by whoever holds this.
// Moving it moves the client's count (the slot) and copies the descriptor's number.
struct accepted {
  int fd = -1;
  peer_address peer;
  client_slot slot;  // the connection's place in its client's count, if counted
  // Accepted on a TLS listener: the connection layers a tls_transport on the socket, and a
  // refusal closes it without a plaintext answer the client could not read.
  tls_context* tls = nullptr;
  // A TLS session whose handshake has ended (the queue model's handshake stage), owned by
  // whoever holds this: the connection layers it on the socket; a refusal frees it.
  SSL* ssl = nullptr;
};

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

// The --max-connections budget of a model's threads: lock-free, so no accepting thread waits on
// another for it.
class connection_budget {
 public:
  explicit connection_budget(std::size_t max) noexcept : max_(max) {}
  // True if one more connection may be served; then release() must follow.
  bool admit() noexcept {
    if (open_.fetch_add(1, std::memory_order_relaxed) < max_) return true;
    open_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  void release() noexcept { open_.fetch_sub(1, std::memory_order_relaxed); }
  // Connections admitted and not yet released (an admit() past the limit counts for a moment).
  [[nodiscard]] std::size_t admitted() const noexcept {
    return open_.load(std::memory_order_relaxed);
  }

 private:
  std::size_t max_;
  std::atomic<std::size_t> open_{0};
};

// Why a connection is refused.
enum class refusal_reason {
  overloaded,  // past --max-connections, or nothing could take it: 503
  per_client,  // past --max-connections-per-client: 429
};

// The answers to a refused connection.
inline constexpr std::string_view refused_response =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 33\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    "Too many connections; try again.\n";
inline constexpr std::string_view refused_per_client_response =
    "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 40\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    "Too many connections from your address.\n";

[[nodiscard]] constexpr std::string_view refusal_response(refusal_reason why) noexcept {
  return why == refusal_reason::per_client ? refused_per_client_response : refused_response;
}

// Counts a refusal and its answer in ctx.counters.
void count_refusal(server_context& ctx, refusal_reason why) noexcept;

// Answers the 503 of --max-connections (or of a connection nothing could take), or the 429 of
// --max-connections-per-client, and counts the refusal. A refused connection is no part of its
// client's count: its slot is given back first. The socket goes to ctx.refused, which lingers on it until the client has read the
// answer and closed (refusals.hpp); when that cannot take it, the answer gets one try and the
// socket is closed at once (a client that cannot take 150 bytes now does not get them, and
// request bytes still unread make the close a reset).
void refuse_connection(server_context& ctx, accepted&& a,
                       refusal_reason why = refusal_reason::overloaded) noexcept;

}  // namespace spoold
