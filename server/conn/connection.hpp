// One HTTP/1.1 connection: the request/response state machine every model runs (README.md,
// "The connection"). It reads through its transport, parses with http::parse_request, asks the
// application for an answer, writes it back, and keeps the timeouts; it never waits. What differs
// between models is the driver: which thread calls it, how that thread learns that the socket is
// ready, and where blocking application work (store calls) runs.
//
// Driving a connection (every driver follows these steps, on one thread at a time):
//  - when the socket is ready: on_io(readable, writable), then serve();
//  - while has_ready_work(): serve() again (an event loop may first serve its other connections:
//    serve() answers at most `max_requests` per call);
//  - when deadline() has passed: on_deadline(); at the server's stop: on_stop();
//  - a driver whose run_job() handed a job elsewhere calls job_done() with its answer, then
//    serve(); until then job_pending() holds and the connection neither reads nor parses.
// A level-triggered driver (poll()) waits for interest(); an edge-triggered one (epoll) watches
// both directions and relies on the transport's short-read contract (transport.hpp).
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "app/metrics.hpp"
#include "conn/accepted.hpp"
#include "conn/transport.hpp"
#include "event/stop_signal.hpp"
#include "http/request.hpp"
#include "http/response.hpp"
#include "limits/connection_budget.hpp"
#include "limits/refusal.hpp"
#include "net.hpp"
#include "server_context.hpp"

namespace spoold {

class tls_transport;

using steady_clock = std::chrono::steady_clock;

// Pipelined requests an event loop lets one connection answer per turn before the others get
// theirs.
inline constexpr int requests_per_turn = 32;

// How long a closing connection keeps reading (and discarding) what the client still sends, so
// that closing does not reset the connection before the client has read our last response.
inline constexpr auto linger_time = std::chrono::seconds(2);

// The answer to plain HTTP sent to the TLS port.
inline constexpr std::string_view plaintext_response =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 40\r\nConnection: close\r\n\r\n"
    "This port speaks HTTPS only (TLS 1.2+).\n";
static_assert(plaintext_response.size() - plaintext_response.find("\r\n\r\n") - 4 == 40);

// Work of the application that may block (a store call); it returns the answer.
using blocking_job = std::function<http::response()>;

// Runs `job` on the calling thread; an exception it throws becomes a 500.
http::response run_job_here(blocking_job& job);

class connection;

// What a connection waits on its client for, in the states a worker gives up first when every
// worker is busy and clients wait for one (serve_connection, worker_pressure.hpp); the order of
// metrics.hpp's shed_state_names.
enum class shed_state : std::uint8_t { handshake, proxy_header, head, idle };
static_assert(static_cast<std::size_t>(shed_state::idle) + 1 == shed_states &&
              shed_state_names[static_cast<std::size_t>(shed_state::head)] == "head");

// Where a connection is in its life: exactly one of these at a time, stored as one value
// (README.md, "States"). A connection starts in proxy_header, handshake or serving (the refusal
// constructor: serving, then lingering at once) and moves only along legal_transition(); every
// change goes through one function, which asserts that in debug builds. Within serving, what the
// connection waits for (writing an answer, reading a request, idle) follows from its buffers,
// since a pipelining client's next request may arrive while an answer is still being written.
enum class conn_state : std::uint8_t {
  proxy_header,  // --proxy-protocol from a --trust peer: nothing but the header is read
  handshake,     // TLS: nothing but the handshake happens until it has ended
  serving,       // reading requests, answering them, writing answers, or idle
  job,           // the driver took the current request's blocking job elsewhere
  lingering,     // our side is shut after a final answer; reading until the client closes
  closed,        // the socket is closed
};

[[nodiscard]] constexpr bool legal_transition(conn_state from, conn_state to) noexcept {
  using enum conn_state;
  switch (from) {
    case proxy_header:  // the header read: a handshake next, or requests
      return to == handshake || to == serving || to == closed;
    case handshake:  // ended; or a per-client refusal's answer (after a PROXY header) sent
      return to == serving || to == lingering || to == closed;
    case serving:
      return to == job || to == lingering || to == closed;
    case job:  // the job's answer came back
      return to == serving || to == closed;
    case lingering:
      return to == closed;
    case closed:
      return false;
  }
  return false;
}
static_assert(!legal_transition(conn_state::closed, conn_state::serving) &&
              !legal_transition(conn_state::lingering, conn_state::serving) &&
              !legal_transition(conn_state::job, conn_state::lingering) &&
              legal_transition(conn_state::proxy_header, conn_state::handshake));

// Picks the constructor of a connection that is refused rather than served.
struct refusal_t {
  explicit refusal_t() = default;
};
inline constexpr refusal_t refusal{};

// What a connection needs from whoever drives it. Only run_job() is virtual: it is called for
// requests with blocking work alone, which pay for a hand-off anyway; what every request asks
// (stopping) and every connection tells (opened, closed) are plain calls.
class connection_driver {
 public:
  // A blocking job for `c`'s current request. Returns the answer if the job ran at once (or could
  // not be taken: then a 503). Returns nullopt if it was handed to another thread: the driver
  // then calls c.job_done() with the answer, on the connection's thread.
  virtual std::optional<http::response> run_job(connection& c, blocking_job&& job) = 0;
  // The server is stopping: from now on answers say Connection: close.
  [[nodiscard]] bool stopping() const noexcept { return stop_.raised(); }
  // Connections of this driver whose socket is open.
  [[nodiscard]] std::size_t open_connections() const noexcept { return open_; }

  // Where the connections of this driver parse their requests: one per driver thread, so that
  // its vectors keep their capacity from one request to the next.
  http::request request;

 protected:
  // `budget`: where a closing connection gives back the place its accepting thread admitted it
  // to (nullptr: the driver's model counts connections itself).
  explicit connection_driver(const stop_signal& stop, connection_budget* budget = nullptr) noexcept
      : stop_(stop), budget_(budget) {}
  ~connection_driver() = default;
  connection_driver(const connection_driver&) = delete;
  connection_driver& operator=(const connection_driver&) = delete;

 private:
  friend class connection;
  void opened() noexcept { ++open_; }
  void closed() noexcept {
    --open_;
    if (budget_ != nullptr) budget_->release();
  }

  const stop_signal& stop_;
  connection_budget* budget_;
  std::size_t open_ = 0;  // touched by the driver's thread only
};

class connection {
 public:
  // Takes the accepted socket and counts the connection as opened.
  connection(server_context& ctx, connection_driver& driver, accepted&& a,
             steady_clock::time_point now) noexcept;
  // Refuses the accepted socket: answers refusal_response(why) (503 or 429, Connection: close)
  // at once and goes on as every final answer does, lingering until the client has closed or
  // the linger time is over (finish_or_linger). It never parses; it counts as refused, not as
  // opened, and is no part of its driver's count nor of any budget. Throws std::bad_alloc;
  // `a`'s socket is then closed.
  connection(server_context& ctx, connection_driver& driver, accepted&& a,
             steady_clock::time_point now, refusal_t, refusal_reason why);
  ~connection();  // closes the socket if still open; not virtual: delete the type you made
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  [[nodiscard]] int fd() const noexcept { return socket_.fd(); }
  [[nodiscard]] conn_state state() const noexcept { return state_; }
  [[nodiscard]] bool closed() const noexcept { return state_ == conn_state::closed; }
  // A job handed elsewhere still refers to the connection: in state job, or closed since (a
  // timeout, a write error); the driver frees the object only once job_done() has come.
  [[nodiscard]] bool job_pending() const noexcept { return job_pending_; }

  // The socket is ready: takes what it holds, as far as input is taken now, and sends what is
  // pending.
  void on_io(bool readable, bool writable, steady_clock::time_point now);
  // An edge-triggered driver saw the client's end of stream (EPOLLRDHUP or EPOLLHUP) with this
  // readiness. The end may be queued behind data that a short read takes, and no new edge will
  // announce it, so from now on a short read is not taken as "drained": reads go on until they
  // see the end (transport.hpp, the short-read contract). A level-triggered driver needs none.
  void on_peer_end() noexcept { peer_end_queued_ = true; }
  // on_io() for poll()'s revents.
  void on_poll(short revents, steady_clock::time_point now) {
    on_io((revents & (POLLIN | POLLHUP | POLLERR)) != 0,
          (revents & (POLLOUT | POLLHUP | POLLERR)) != 0, now);
  }
  // Answers up to `max_requests` requests, reading more while the socket may hold some, then
  // sends what it can.
  void serve(int max_requests, steady_clock::time_point now);
  // serve() has work that does not wait for the socket.
  [[nodiscard]] bool has_ready_work() const noexcept;
  // POLLIN and/or POLLOUT: what the connection waits for (level-triggered drivers).
  [[nodiscard]] short interest() const noexcept;

  // When on_deadline() has something to do: a timeout, or the end of the grace period.
  [[nodiscard]] steady_clock::time_point deadline() const noexcept;
  void on_deadline(steady_clock::time_point now);  // does nothing before deadline()
  // The server is stopping: an idle connection closes now (after taking a request that already
  // arrived); the others answer with Connection: close, and close at `grace_deadline` at the
  // latest.
  void on_stop(steady_clock::time_point now, steady_clock::time_point grace_deadline);
  // Since when the connection has waited on its client alone: a TLS handshake or PROXY header
  // since the accept, a request head since its first byte, or idle between requests since the
  // last answer. nullopt in every other state (a request body on its way, an answer being
  // written, a job, the lingering close, closed): those are not given up.
  [[nodiscard]] std::optional<steady_clock::time_point> waiting_on_client_since() const noexcept;
  // Gives the connection up so that its worker can take a client waiting for one; only in a
  // state waiting_on_client_since() names. Counted in spoold_connections_shed_total by state;
  // a handshake also as failed (timeout), a PROXY header as a header error. A partial head is
  // answered 408 first, then closed without the lingering close, which would hold the worker:
  // the client's bytes are read away before the close, so it sends no reset over the answer
  // unless the client sends more.
  void shed(steady_clock::time_point now);
  // The answer of the job that run_job() handed elsewhere (its connection may have closed since).
  void job_done(http::response r);
  void close() noexcept;

 private:
  // Request bytes: grows by doubling up to a limit and never zero-fills what a read overwrites.
  class input_buffer {
   public:
    [[nodiscard]] std::size_t size() const noexcept { return end_ - start_; }
    [[nodiscard]] bool empty() const noexcept { return end_ == start_; }
    [[nodiscard]] std::string_view view() const noexcept {
      return {bytes_.get() + start_, end_ - start_};
    }
    void consume(std::size_t n) noexcept;
    void clear() noexcept { start_ = end_ = 0; }
    // Room for a read of at least `chunk` bytes, compacting or growing up to `limit` bytes;
    // false when the buffer cannot take that much more.
    bool make_room(std::size_t chunk, std::size_t limit);
    [[nodiscard]] bool can_take(std::size_t chunk, std::size_t limit) const noexcept {
      return capacity_ - size() >= chunk || capacity_ < limit;
    }
    [[nodiscard]] char* tail() noexcept { return bytes_.get() + end_; }
    [[nodiscard]] std::size_t room() const noexcept { return capacity_ - end_; }
    void commit(std::size_t n) noexcept { end_ += n; }

   private:
    std::unique_ptr<char[]> bytes_;
    std::size_t capacity_ = 0;
    std::size_t start_ = 0;
    std::size_t end_ = 0;
  };

  // What a response needs from its request once the request's bytes are gone.
  struct request_info {
    int version_minor = 1;
    bool keep_alive = true;
    std::string log_line;  // "GET /x HTTP/1.1", only when access logging is on
    std::string client;    // the address to log if not the peer's (X-Forwarded-For)
  };

  [[nodiscard]] bool has_input() const noexcept { return !in_.empty(); }
  [[nodiscard]] bool has_output() const noexcept {
    return out_sent_ < out_.size() || file_.has_value();
  }
  // Requests are parsed and answered: open, not closing, no job running, output not backed up.
  [[nodiscard]] bool takes_requests() const noexcept;
  // Input is read: no job running and the unsent answers are below the high-water mark.
  [[nodiscard]] bool takes_input() const noexcept;
  [[nodiscard]] bool can_read_more() const noexcept;
  [[nodiscard]] bool worth_parsing() const noexcept;
  [[nodiscard]] std::size_t input_limit() const noexcept;
  [[nodiscard]] bool stopping() const noexcept { return stopping_ || driver_.stopping(); }
  // deadline() in state serving: writing, reading a request, or idle, in that order.
  [[nodiscard]] steady_clock::time_point serving_deadline() const noexcept;

  // The PROXY header state (--proxy-protocol, trusted peers): reads the header off the raw
  // socket, then counts the connection for the client it names.
  void read_proxy_header(steady_clock::time_point now);
  void proxy_header_done(const std::optional<ip_address>& source, steady_clock::time_point now);
  void fail_proxy_header() noexcept;
  void read_input(steady_clock::time_point now);
  void drain_lingering();
  void answer(http::request& req, std::size_t consumed, steady_clock::time_point now);
  // Under --rate-limit: 0 if a request of `client` may be served, else the seconds the client
  // should wait (Retry-After). Takes a token of the client's bucket; nullopt is not limited.
  std::uint32_t rate_wait(const std::optional<ip_address>& client, steady_clock::time_point now);
  [[nodiscard]] bool rate_limited() const noexcept;  // --rate-limit is on
  void respond(const request_info& info, http::response r);
  void fail_request(int status, std::string_view reason);
  void flush(steady_clock::time_point now);
  void finish_or_linger(steady_clock::time_point now);
  void set_nodelay() noexcept;
  // The one place state_ changes: asserts legal_transition() in debug builds.
  void enter(conn_state next) noexcept;
  // The state after the PROXY header, or at the start without one: a handshake while TLS has
  // not ended, else serving.
  [[nodiscard]] conn_state after_proxy_header() const noexcept;
  // TLS: counts the handshake once it has ended (spoold_tls_handshakes_total).
  void note_handshake() noexcept;
  // Plain HTTP arrived on the TLS port: answers a plaintext 400 and lingers, as any final answer.
  void answer_plaintext(steady_clock::time_point now);

  server_context& ctx_;
  connection_driver& driver_;
  // The socket, held in place (not allocated apart); io_ is what every read and write goes
  // through: the socket itself, or a transport layered on it (transport.hpp).
  socket_transport socket_;
  transport* io_ = &socket_;
  // The TLS layer over socket_ (a connection of a TLS listener), which io_ then points at.
  std::unique_ptr<tls_transport> tls_;
  bool handshake_counted_ = false;  // note_handshake() counted it
  input_buffer in_;
  std::string out_;
  std::size_t out_sent_ = 0;
  std::optional<http::response> file_;  // a file body still being sent
  // How far the last incomplete parse got: bytes of the request already looked at, the length
  // at which parsing again can change the answer (0: head incomplete), and whether a line end
  // arriving before that can too. See worth_parsing().
  std::size_t parsed_upto_ = 0;
  std::size_t needed_ = 0;
  bool awaits_line_ = false;
  steady_clock::time_point head_started_{};  // first byte of the request being received
  steady_clock::time_point last_activity_{};
  steady_clock::time_point linger_until_{};
  steady_clock::time_point grace_deadline_{};
  // The socket may hold bytes not read yet: set by readiness, cleared by a short read. Without
  // it an edge-triggered driver would pay a second read that says EAGAIN for every request.
  bool maybe_readable_ = false;
  conn_state state_ = conn_state::serving;  // state(); changed by enter() alone
  bool peer_end_queued_ = false;            // on_peer_end(): read past short reads until the end
  bool job_pending_ = false;                // job_pending(): a job handed elsewhere refers to this
  bool close_after_write_ = false;          // the last response said Connection: close
  bool peer_closed_ = false;                // the client shut its side (read saw end-of-file)
  bool continue_sent_ = false;    // "100 Continue" went out for the request being received
  bool discarded_input_ = false;  // an error response threw away unread request bytes
  bool stopping_ = false;         // on_stop() was called
  bool nodelay_ = false;          // TCP_NODELAY set: only once the connection is kept alive
  bool refused_ = false;          // made by the refusal constructor: not counted as open
  bool trusted_peer_ = false;     // a --trust peer: its requests name their client
  std::string proxy_bytes_;       // what was read of the PROXY header (state proxy_header)
  // The client the PROXY header named; nullopt without one (then the peer is the client).
  std::optional<ip_address> proxied_client_;
  std::string proxied_text_;  // its text for the access log, when logging
  request_info pending_;      // the request whose job is running
  peer_address peer_;
  client_slot slot_;  // the connection's place in its client's count; given back at close()
};

}  // namespace spoold
