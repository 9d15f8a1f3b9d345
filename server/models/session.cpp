#include "models/session.hpp"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>
#include <system_error>

#include "http/parser.hpp"
#include "net.hpp"

namespace spoold {
namespace {

constexpr std::size_t read_chunk = 16 * 1024;
// Past this much unsent output the session stops parsing pipelined requests until it drains.
constexpr std::size_t output_high_water = 256 * 1024;
// How long a closing connection keeps reading (and discarding) what the client still sends, so
// that closing does not reset the connection before the client has read our last response.
constexpr auto linger_time = std::chrono::seconds(2);
constexpr auto log_flush_interval = std::chrono::milliseconds(100);

std::int64_t to_ns(steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Milliseconds for poll() until `deadline`, rounded up so that the wake-up is not early.
int poll_timeout(steady_clock::time_point deadline, steady_clock::time_point now) {
  if (deadline <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<std::int64_t>(ms, std::numeric_limits<int>::max()));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// stop_signal

stop_signal::stop_signal() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2 (stop signal)");
  }
  read_fd_ = fds[0];
  write_fd_.store(fds[1], std::memory_order_relaxed);
}

stop_signal::~stop_signal() {
  raise();
  ::close(read_fd_);
}

void stop_signal::raise() noexcept {
  // The flag and the time first, so that whoever wakes from the pipe finds them set.
  if (!raised_.load(std::memory_order_acquire)) {
    raised_at_ns_.store(to_ns(steady_clock::now()), std::memory_order_relaxed);
    raised_.store(true, std::memory_order_release);
  }
  // Exchange before close: a child forked meanwhile either finds -1 or a descriptor that was
  // still open when it was forked, never a number the parent has reused since (enter_child).
  const int fd = write_fd_.exchange(-1, std::memory_order_acq_rel);
  if (fd >= 0) ::close(fd);  // the read end reaches end-of-file for every process
}

void stop_signal::note_raised() const noexcept {
  if (raised_.load(std::memory_order_acquire)) return;
  raised_at_ns_.store(to_ns(steady_clock::now()), std::memory_order_relaxed);
  raised_.store(true, std::memory_order_release);
}

bool stop_signal::raised() const noexcept {
  if (raised_.load(std::memory_order_acquire)) return true;
  if (!child_) return false;
  // The parent's flag is not ours: look at the pipe.
  pollfd p{read_fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0) {
    note_raised();
    return true;
  }
  return false;
}

steady_clock::time_point stop_signal::raised_at() const noexcept {
  if (!raised()) return steady_clock::now();
  return steady_clock::time_point(
      std::chrono::nanoseconds(raised_at_ns_.load(std::memory_order_relaxed)));
}

bool stop_signal::wait_for(std::chrono::milliseconds timeout) const noexcept {
  const auto until = steady_clock::now() + timeout;
  for (;;) {
    if (raised_.load(std::memory_order_acquire)) return true;
    const auto now = steady_clock::now();
    pollfd p{read_fd_, POLLIN, 0};
    int n = ::poll(&p, 1, poll_timeout(until, now));
    if (n > 0) {
      note_raised();
      return true;
    }
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

void stop_signal::enter_child() noexcept {
  child_ = true;
  const int fd = write_fd_.exchange(-1, std::memory_order_relaxed);
  if (fd >= 0) ::close(fd);
}

// ---------------------------------------------------------------------------------------------
// http_session

http_session::http_session(server_context& ctx, const stop_signal& stop, int fd,
                           const sockaddr_in& peer)
    : ctx_(ctx), stop_(stop), fd_(fd), peer_(peer) {
  int one = 1;
  // Answers go out at once; a failure only costs latency.
  (void)::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  last_activity_ = steady_clock::now();
  ctx_.counters.connection_opened();
}

http_session::~http_session() { close_connection(); }

void http_session::close_connection() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  file_.reset();
  ctx_.counters.connection_closed();
}

std::size_t http_session::input_cap() const noexcept {
  // A whole request of the largest allowed size, and room for the next one's first bytes.
  return ctx_.opts.limits.max_head + ctx_.opts.limits.max_body + read_chunk;
}

bool http_session::output_backed_up() const noexcept {
  return file_.has_value() || out_.size() - out_sent_ > output_high_water;
}

short http_session::interest() const noexcept {
  if (fd_ < 0) return 0;
  if (lingering_) return POLLIN;
  // While an answer is being sent, request bytes wait in the socket: that is the backpressure
  // on a client that pipelines faster than it reads.
  if (has_output()) return POLLOUT;
  return POLLIN;
}

steady_clock::time_point http_session::deadline() const noexcept {
  const auto& o = ctx_.opts;
  steady_clock::time_point d;
  if (lingering_) {
    d = linger_until_;
  } else if (has_output()) {
    d = last_activity_ + o.write_timeout;
  } else if (has_input()) {
    d = head_started_ + o.header_timeout;
  } else if (stopping_) {
    d = last_activity_;  // idle while stopping: due now
  } else {
    d = last_activity_ + o.idle_timeout;
  }
  return stopping_ ? std::min(d, grace_deadline_) : d;
}

bool http_session::has_ready_work() const noexcept {
  if (fd_ < 0 || lingering_ || close_after_write_ || output_backed_up()) return false;
  // After end-of-file, serve() drops a half request and closes.
  return (has_input() && worth_parsing()) || (peer_closed_ && !has_output());
}

// After an incomplete parse, parsing again only helps once the body is all here, or (head still
// incomplete) once a line ended or the request line's limit was passed; the first look at a
// request always parses, so junk is refused at once. (The epoll model's rule: a request that
// trickles in is not parsed again for every few bytes, which would be quadratic in its size.)
bool http_session::worth_parsing() const noexcept {
  const std::string_view buffer(in_.data() + in_start_, in_end_ - in_start_);
  if (parsed_upto_ == 0 || buffer.size() < parsed_upto_ || peer_closed_) return true;
  // Nothing new since the last look: the answer would be the same (and the drivers ask
  // again and again, so this also keeps them from spinning).
  if (buffer.size() == parsed_upto_) return false;
  if (needed_ > 0) return buffer.size() >= needed_;
  if (buffer.size() > ctx_.opts.limits.max_request_line) return true;
  return buffer.substr(parsed_upto_).find('\n') != std::string_view::npos;
}

void http_session::on_ready(short revents, steady_clock::time_point now) {
  if (fd_ < 0) return;
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    if (lingering_ || !has_output()) read_input(now);
  }
  if (fd_ < 0) return;
  // An error or hang-up while sending shows as a failed send in flush().
  if (has_output() && (revents & (POLLOUT | POLLHUP | POLLERR))) flush(now);
}

void http_session::read_input(steady_clock::time_point now) {
  if (lingering_) {
    char sink[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, sink, sizeof sink, 0);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      close_connection();  // the client closed (or reset): it has our answer
      return;
    }
  }
  const std::size_t cap = input_cap();
  if (in_start_ == in_end_) in_start_ = in_end_ = 0;
  if (in_.size() - in_end_ < read_chunk) {
    if (in_start_ > 0) {
      std::memmove(in_.data(), in_.data() + in_start_, in_end_ - in_start_);
      in_end_ -= in_start_;
      in_start_ = 0;
    }
    if (in_.size() - in_end_ < read_chunk && in_.size() < cap) {
      in_.resize(std::min(cap, std::max(in_.size() * 2, in_end_ + read_chunk)));
    }
  }
  // A full buffer holds more than any acceptable request: the parser has already refused it.
  if (in_end_ == in_.size()) return;
  ssize_t n;
  do {
    n = ::recv(fd_, in_.data() + in_end_, in_.size() - in_end_, 0);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    if (in_start_ == in_end_) head_started_ = now;
    in_end_ += static_cast<std::size_t>(n);
    last_activity_ = now;
    return;
  }
  if (n == 0) {
    peer_closed_ = true;
    if (!has_input() && !has_output()) close_connection();  // the client is done
    return;
  }
  if (errno != EAGAIN && errno != EWOULDBLOCK) close_connection();
}

void http_session::serve(int max_requests, steady_clock::time_point now) {
  int served = 0;
  while (fd_ >= 0 && !lingering_ && !close_after_write_ && !output_backed_up()) {
    if (!has_input() || !worth_parsing() || served == max_requests) break;
    std::string_view buffer(in_.data() + in_start_, in_end_ - in_start_);
    http::parse_result res = http::parse_request(buffer, ctx_.opts.limits, request_);
    parsed_upto_ = buffer.size();
    needed_ = res.needed;
    if (res.status == http::parse_status::incomplete) {
      if (res.needs_continue && !continue_sent_) {
        out_.append("HTTP/1.1 100 Continue\r\n\r\n");
        continue_sent_ = true;
      }
      if (peer_closed_) in_start_ = in_end_;  // half a request, and no more coming
      // The parser refuses a request this large before it fills the buffer; if it ever did
      // not, waiting for input that cannot be stored would make poll() spin.
      if (buffer.size() >= input_cap()) fail_request(431, "The request is too large.");
      break;
    }
    ++served;
    if (res.status == http::parse_status::error) {
      fail_request(res.error_status, res.error_reason);
      break;
    }
    request_info info;
    info.version_minor = request_.version_minor;
    info.keep_alive = request_.keep_alive;
    if (ctx_.log) {
      info.log_line.reserve(request_.method_text.size() + request_.target.size() + 10);
      info.log_line.append(request_.method_text).append(" ").append(request_.target);
      info.log_line.append(request_.version_minor == 0 ? " HTTP/1.0" : " HTTP/1.1");
    }
    handled h = ctx_.application.handle(request_);
    continue_sent_ = false;
    parsed_upto_ = 0;
    needed_ = 0;
    if (h.blocking) {
      // The store call runs here: the blocking models give the connection a thread or process
      // of its own, and the poll model has no other thread to give it to (README.md).
      try {
        h.response = h.blocking();
      } catch (const std::exception& e) {
        h.response = http::error_response(500, e.what());
      }
    }
    respond(info, std::move(h.response));
    in_start_ += res.consumed;
    if (has_input()) head_started_ = now;
  }
  flush(now);
  if (fd_ >= 0 && peer_closed_ && !has_input() && !has_output() && !close_after_write_ &&
      !lingering_) {
    close_connection();  // the client is done and has every answer
  }
}

void http_session::fail_request(int status, std::string_view reason) {
  request_info info;
  info.keep_alive = false;
  if (ctx_.log) info.log_line = "-";
  respond(info, http::error_response(status, reason));
  in_start_ = in_end_;  // the rest of the stream cannot be trusted
  parsed_upto_ = 0;
  needed_ = 0;
  discarded_input_ = true;
}

void http_session::respond(const request_info& info, http::response r) {
  const bool keep = info.keep_alive && !r.close && !stopping();
  const std::size_t before = out_.size();
  http::write_head(out_, r, info.version_minor, keep);
  std::uint64_t bytes = out_.size() - before;
  std::uint64_t body_bytes = 0;
  if (!r.head_only) {
    body_bytes = r.body_length();
    bytes += body_bytes;
    if (r.file_fd >= 0) {
      file_.emplace(std::move(r));
    } else {
      out_.append(r.memory_body());
    }
  }
  ctx_.counters.record_response(r.status, bytes);
  if (ctx_.log) ctx_.log->record(format_ipv4(peer_), info.log_line, r.status, body_bytes);
  if (!keep) close_after_write_ = true;
}

void http_session::flush(steady_clock::time_point now) {
  if (fd_ < 0) return;
  while (out_sent_ < out_.size()) {
    const int more = file_ ? MSG_MORE : 0;
    ssize_t n = ::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL | more);
    if (n > 0) {
      out_sent_ += static_cast<std::size_t>(n);
      last_activity_ = now;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close_connection();
    return;
  }
  out_.clear();
  out_sent_ = 0;
  while (file_) {
    http::response& f = *file_;
    if (f.file_length == 0) {
      file_.reset();
      break;
    }
    off_t offset = static_cast<off_t>(f.file_offset);
    const std::size_t chunk = std::min<std::uint64_t>(f.file_length, 1u << 20);
    ssize_t n = ::sendfile(fd_, f.file_fd, &offset, chunk);
    if (n > 0) {
      f.file_offset += static_cast<std::uint64_t>(n);
      f.file_length -= static_cast<std::uint64_t>(n);
      last_activity_ = now;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // n == 0: the file shrank under us; the promised length cannot be kept.
    close_connection();
    return;
  }
  if (close_after_write_ && !lingering_) finish_or_linger(now);
}

void http_session::finish_or_linger(steady_clock::time_point now) {
  // Unread request bytes (an error response, or requests after Connection: close) would make
  // close() send a reset that can destroy our last response in flight; read them away first.
  if (peer_closed_ || (!has_input() && !discarded_input_)) {
    close_connection();
    return;
  }
  if (::shutdown(fd_, SHUT_WR) != 0) {
    close_connection();
    return;
  }
  lingering_ = true;
  linger_until_ = now + linger_time;
  in_start_ = in_end_ = 0;
  read_input(now);
}

void http_session::on_deadline(steady_clock::time_point now) {
  if (fd_ < 0 || now < deadline()) return;
  if ((stopping_ && now >= grace_deadline_) || lingering_ || has_output()) {
    close_connection();  // grace over, linger over, or a client that reads nothing
  } else if (has_input()) {
    fail_request(408, "The request took too long to arrive.");
    flush(now);
  } else if (stopping_) {
    // Idle while stopping (at the stop, or once the answer in flight then is sent). A request
    // may have arrived that nobody read yet (say, on a connection that waited in a queue): it
    // counts as in flight and is answered with Connection: close. Otherwise close now.
    read_input(now);
    if (fd_ >= 0 && !has_input()) close_connection();
  } else {
    close_connection();  // idle keep-alive
  }
}

void http_session::on_stop(steady_clock::time_point now) {
  if (stopping_) return;
  stopping_ = true;
  grace_deadline_ = stop_.raised_at() + ctx_.opts.grace;
  on_deadline(now);
}

// ---------------------------------------------------------------------------------------------
// The blocking driver

void serve_connection(server_context& ctx, const stop_signal& stop, int fd, const sockaddr_in& peer,
                      session_options opts) {
  http_session s(ctx, stop, fd, peer);
  bool stop_seen = false;
  auto now = steady_clock::now();
  while (!s.closed()) {
    if (s.has_ready_work()) s.serve(std::numeric_limits<int>::max(), now);
    if (s.closed()) break;
    // Every turn goes through poll(), without waiting if there is more to serve, so that the
    // stop and the deadlines are seen whatever the session does.
    const bool ready = s.has_ready_work();
    const short interest = s.interest();
    if (opts.flush_log_when_idle && ctx.log && interest == POLLIN && !ready) ctx.log->flush();
    // Once the stop is seen its descriptor stays readable: leave it out of the set.
    pollfd fds[2] = {{s.fd(), interest, 0}, {stop.fd(), POLLIN, 0}};
    const nfds_t count = stop_seen ? 1 : 2;
    const int n = ::poll(fds, count, ready ? 0 : poll_timeout(s.deadline(), now));
    now = steady_clock::now();
    if (n < 0) {
      if (errno == EINTR) continue;
      std::perror("spoold: poll");
      break;  // the session's destructor closes the socket
    }
    if (count == 2 && fds[1].revents != 0) {
      stop_seen = true;
      s.on_stop(now);
    }
    if (fds[0].revents != 0) s.on_ready(fds[0].revents, now);
    s.on_deadline(now);
  }
  if (opts.flush_log_when_idle && ctx.log) ctx.log->flush();
}

// ---------------------------------------------------------------------------------------------
// Refusing

void refuse_connection(server_context& ctx, int fd) noexcept {
  // One try: a client that cannot take 150 bytes now does not get them.
  (void)::send(fd, refused_response.data(), refused_response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::close(fd);
  ctx.counters.connection_refused();
  ctx.counters.record_response(503, refused_response.size());
}

// ---------------------------------------------------------------------------------------------
// log_flusher, thread names

log_flusher::log_flusher(access_log* log) : log_(log) {
  if (log_ == nullptr) return;
  thread_ = std::thread([this] {
    name_this_thread("spoold-logflush");
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, log_flush_interval, [this] { return done_; })) {
      lock.unlock();
      log_->flush();
      lock.lock();
    }
  });
}

log_flusher::~log_flusher() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
  log_->flush();
}

void name_this_thread(const std::string& name) noexcept {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace spoold
