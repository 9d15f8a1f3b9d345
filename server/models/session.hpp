// What the classic models share: one HTTP connection served with non-blocking I/O and poll()
// (http_session), a driver that serves it to its end on the calling thread (serve_connection),
// the stop signal every waiting thread and child process watches, and the 503 refusal. The
// request handling is the epoll model's, rule for rule: the same parser, limits, timeouts,
// keep-alive and lingering-close behaviour (server/models/README.md, "Connection states").
// Accepting on a blocking socket is blocking_model.hpp's.
#pragma once

#include <netinet/in.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http/request.hpp"
#include "http/response.hpp"
#include "models/model.hpp"

namespace spoold {

using steady_clock = std::chrono::steady_clock;

// How a model tells everything that waits that the server is stopping. Two forms: a flag for
// the threads of this process, and a pipe whose read end reaches end-of-file once the stop is
// raised, so that it can sit in a poll() set beside a socket and so that forked children, which
// share the pipe but not the flag, see it too. Only the parent holds the write end (a child
// drops its copy in enter_child), so a parent that dies also stops its children.
class stop_signal {
 public:
  stop_signal();  // throws std::system_error if no pipe can be made
  ~stop_signal();
  stop_signal(const stop_signal&) = delete;
  stop_signal& operator=(const stop_signal&) = delete;

  void raise() noexcept;  // idempotent
  // True once raised. In a forked child this looks at the pipe (one poll() call) until it has
  // seen the stop.
  [[nodiscard]] bool raised() const noexcept;
  // When the stop was raised; in a child, when it first saw it. steady_clock::now() before.
  [[nodiscard]] steady_clock::time_point raised_at() const noexcept;
  // Readable (POLLIN or POLLHUP) once raised.
  [[nodiscard]] int fd() const noexcept { return read_fd_; }
  // Sleeps until raised or `timeout` passes; true if raised.
  bool wait_for(std::chrono::milliseconds timeout) const noexcept;
  // Call first thing in a forked child: closes the inherited write end.
  void enter_child() noexcept;

 private:
  void note_raised() const noexcept;

  int read_fd_ = -1;
  std::atomic<int> write_fd_{-1};  // -1 once raised (or in a child)
  bool child_ = false;
  mutable std::atomic<bool> raised_{false};
  mutable std::atomic<std::int64_t> raised_at_ns_{0};
};

// One client connection: the socket is non-blocking and every call does what it can without
// waiting. The caller owns the waiting: it polls fd() for interest() until deadline(), then
// reports what happened (on_ready, on_deadline, on_stop) and calls serve() while
// has_ready_work(). Blocking jobs of the application (store calls) run inline in serve(): the
// models that use this class give each connection its own thread or process, or (poll) have
// nothing else to run them on.
class http_session {
 public:
  // Takes ownership of `fd` (accepted, non-blocking); counts the connection as opened.
  http_session(server_context& ctx, const stop_signal& stop, int fd, const sockaddr_in& peer);
  ~http_session();  // closes the socket if still open
  http_session(const http_session&) = delete;
  http_session& operator=(const http_session&) = delete;

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] bool closed() const noexcept { return fd_ < 0; }
  // POLLIN and/or POLLOUT: what the connection waits for now.
  [[nodiscard]] short interest() const noexcept;
  // When on_deadline() has something to do (a timeout, or the grace period's end).
  [[nodiscard]] steady_clock::time_point deadline() const noexcept;
  // Buffered requests can be served without waiting for the socket.
  [[nodiscard]] bool has_ready_work() const noexcept;

  void on_ready(short revents, steady_clock::time_point now);
  void on_deadline(steady_clock::time_point now);  // does nothing before deadline()
  // The server is stopping: an idle connection closes now (after taking a request that already
  // arrived), the others answer with Connection: close and end by the grace period.
  void on_stop(steady_clock::time_point now);
  // Answers up to `max_requests` buffered requests, then sends what it can.
  void serve(int max_requests, steady_clock::time_point now);

 private:
  // What a response needs from its request once the request's bytes are gone.
  struct request_info {
    int version_minor = 1;
    bool keep_alive = true;
    std::string log_line;  // "GET /x HTTP/1.1", only when access logging is on
  };

  [[nodiscard]] bool has_input() const noexcept { return in_end_ > in_start_; }
  [[nodiscard]] bool has_output() const noexcept {
    return out_sent_ < out_.size() || file_.has_value();
  }
  [[nodiscard]] bool output_backed_up() const noexcept;
  [[nodiscard]] std::size_t input_cap() const noexcept;
  [[nodiscard]] bool worth_parsing() const noexcept;
  [[nodiscard]] bool stopping() const noexcept { return stopping_ || stop_.raised(); }
  void read_input(steady_clock::time_point now);
  void respond(const request_info& info, http::response r);
  void fail_request(int status, std::string_view reason);
  void flush(steady_clock::time_point now);
  void finish_or_linger(steady_clock::time_point now);
  void close_connection() noexcept;

  server_context& ctx_;
  const stop_signal& stop_;
  int fd_;
  sockaddr_in peer_;
  std::vector<char> in_;
  std::size_t in_start_ = 0;
  std::size_t in_end_ = 0;
  std::string out_;
  std::size_t out_sent_ = 0;
  std::optional<http::response> file_;  // a file body still being sent
  // How far the last incomplete parse got: bytes of the request already looked at, and the
  // length at which its body is complete (0: head incomplete). See worth_parsing().
  std::size_t parsed_upto_ = 0;
  std::size_t needed_ = 0;
  http::request request_;                    // reused: its vectors keep their capacity
  steady_clock::time_point head_started_{};  // first byte of the request being received
  steady_clock::time_point last_activity_{};
  steady_clock::time_point linger_until_{};
  steady_clock::time_point grace_deadline_{};
  bool stopping_ = false;           // on_stop() was called
  bool close_after_write_ = false;  // the last response said Connection: close
  bool lingering_ = false;          // our side is shut; reading until the client closes
  bool peer_closed_ = false;        // the client shut its side (recv returned 0)
  bool continue_sent_ = false;
  bool discarded_input_ = false;  // an error response threw away unread request bytes
};

struct session_options {
  // A forked child has no thread flushing the access log's buffer: the session flushes it
  // whenever it goes back to waiting for a request, and when it ends.
  bool flush_log_when_idle = false;
};

// Serves the connection on the calling thread until it is closed; takes ownership of `fd`.
void serve_connection(server_context& ctx, const stop_signal& stop, int fd, const sockaddr_in& peer,
                      session_options opts = {});

// Answers the 503 of --max-connections (or of a refused hand-off) and closes `fd`.
void refuse_connection(server_context& ctx, int fd) noexcept;

// Writes the access log's buffer every 100 ms, on its own thread, until destroyed (the epoll
// model's sweep does this for it). Does nothing without an access log.
class log_flusher {
 public:
  explicit log_flusher(access_log* log);
  ~log_flusher();
  log_flusher(const log_flusher&) = delete;
  log_flusher& operator=(const log_flusher&) = delete;

 private:
  access_log* log_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

void name_this_thread(const std::string& name) noexcept;  // cut to 15 characters

}  // namespace spoold
