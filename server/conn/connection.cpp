#include "conn/connection.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "conn/tls.hpp"
#include "http/parser.hpp"
#include "http/proxy_header.hpp"
#include "http/syntax.hpp"
#include "limits/client_limits.hpp"

namespace spoold {
namespace {

// What one read asks for, and the least room the input buffer makes before reading.
constexpr std::size_t read_chunk = 16 * 1024;
// Past this much unsent output a connection stops parsing pipelined requests, and stops reading
// them, until it drains: that is the backpressure on a client that sends faster than it reads.
constexpr std::size_t output_high_water = 256 * 1024;
// The most a single sendfile call is asked to move.
constexpr std::size_t file_chunk = 1u << 20;

constexpr std::string_view continue_response = "HTTP/1.1 100 Continue\r\n\r\n";

// The last address of the request's X-Forwarded-For headers (each proxy appends the peer it
// saw, so the last one is what the trusted proxy itself saw); nullopt if absent or not an
// address.
std::optional<ip_address> forwarded_for(const http::request& req) {
  std::string_view last;
  for (const http::header& h : req.headers) {
    if (http::ascii_iequals(h.name, "X-Forwarded-For")) last = h.value;
  }
  if (const auto comma = last.rfind(','); comma != std::string_view::npos) {
    last.remove_prefix(comma + 1);
  }
  return parse_ip_address(http::syntax::trim_spaces(last));
}

}  // namespace

http::response run_job_here(blocking_job& job) {
  try {
    return job();
  } catch (const std::exception& e) {
    return http::error_response(500, e.what());
  }
}

// ---------------------------------------------------------------------------------------------
// input_buffer

void connection::input_buffer::consume(std::size_t n) noexcept {
  start_ += n;
  if (start_ == end_) start_ = end_ = 0;
}

bool connection::input_buffer::make_room(std::size_t chunk, std::size_t limit) {
  if (capacity_ - end_ >= chunk) return true;
  if (start_ > 0) {
    std::memmove(bytes_.get(), bytes_.get() + start_, end_ - start_);
    end_ -= start_;
    start_ = 0;
    if (capacity_ - end_ >= chunk) return true;
  }
  if (capacity_ >= limit) return false;
  const std::size_t bigger = std::min(limit, std::max(capacity_ * 2, end_ + chunk));
  auto grown = std::make_unique_for_overwrite<char[]>(bigger);
  if (end_ > 0) std::memcpy(grown.get(), bytes_.get(), end_);
  bytes_ = std::move(grown);
  capacity_ = bigger;
  return true;
}

// ---------------------------------------------------------------------------------------------
// connection: life

connection::connection(server_context& ctx, connection_driver& driver, accepted&& a,
                       steady_clock::time_point now) noexcept
    : ctx_(ctx),
      driver_(driver),
      socket_(a.fd),
      last_activity_(now),
      peer_(a.peer),
      slot_(std::move(a.slot)) {
  a.fd = -1;  // socket_'s now
  if (a.tls != nullptr) {
    // The handshake is timed like a request head: it must end within --header-timeout.
    head_started_ = now;
    SSL* ssl = a.ssl != nullptr ? a.ssl : a.tls->new_ssl(socket_.fd());
    a.ssl = nullptr;
    if (ssl != nullptr) tls_.reset(new (std::nothrow) tls_transport(socket_.fd(), ssl));
    if (tls_) {
      io_ = tls_.get();
      handshake_counted_ = tls_->established();  // counted where it ended
      // A handshake that ended elsewhere may have read the first request into the session's
      // buffer (read-ahead), where no readiness of the socket will announce it.
      maybe_readable_ = tls_->established();
      // The handshake's flights, the session tickets after it and the first answer are
      // separate writes: Nagle's algorithm would hold each behind the ACK of the one before.
      set_nodelay();
    } else {
      if (ssl != nullptr) SSL_free(ssl);
      socket_.close();  // out of memory: the client sees the connection close
    }
  }
  bool awaits_proxy_header = false;
  if (!ctx_.opts.trust.empty()) {
    const std::optional<ip_address> ip = peer_.ip();
    trusted_peer_ = ip && is_trusted(ctx_.opts, *ip);
    if (trusted_peer_ && ctx_.opts.proxy_protocol) {
      awaits_proxy_header = true;
      head_started_ = now;  // --header-timeout runs from the accept
    }
  }
  state_ = awaits_proxy_header ? conn_state::proxy_header : after_proxy_header();
  driver_.opened();
  ctx_.counters.connection_opened();
  if (socket_.fd() < 0) {  // the TLS layer could not be made
    enter(conn_state::closed);
    ctx_.counters.connection_closed();
    driver_.closed();
    slot_.release();
  }
}

connection::connection(server_context& ctx, connection_driver& driver, accepted&& a,
                       steady_clock::time_point now, refusal_t, refusal_reason why)
    : ctx_(ctx),
      driver_(driver),
      socket_(a.fd),
      last_activity_(now),
      refused_(true),
      peer_(a.peer) {
  a.fd = -1;  // socket_'s now
  count_refusal(ctx_, why);
  out_.assign(refusal_response(why));
  close_after_write_ = true;
  // Whatever the client sends is read away unanswered: the connection always lingers.
  discarded_input_ = true;
  flush(now);
}

connection::~connection() { close(); }

void connection::enter(conn_state next) noexcept {
  assert(legal_transition(state_, next));
  state_ = next;
}

conn_state connection::after_proxy_header() const noexcept {
  return tls_ && !tls_->established() ? conn_state::handshake : conn_state::serving;
}

void connection::close() noexcept {
  if (closed()) return;
  enter(conn_state::closed);
  if (tls_ && !tls_->established() && tls_->failed()) {
    ctx_.counters.tls_handshake_failed(static_cast<std::size_t>(tls_->failure()));
  }
  if (tls_ && io_ == tls_.get()) tls_->close_notify();  // a TLS peer reads the end as clean
  socket_.close();
  io_ = &socket_;
  tls_.reset();
  file_.reset();
  slot_.release();
  if (refused_) return;  // never counted as opened
  ctx_.counters.connection_closed();
  driver_.closed();
}

// ---------------------------------------------------------------------------------------------
// What the connection does next

bool connection::takes_requests() const noexcept {
  // A handshake runs inside the first reads, which serve() makes as it looks for a request.
  return (state_ == conn_state::serving || state_ == conn_state::handshake) &&
         !close_after_write_ && !file_ && out_.size() - out_sent_ <= output_high_water;
}

bool connection::takes_input() const noexcept {
  return state_ != conn_state::job && out_.size() - out_sent_ <= output_high_water;
}

std::size_t connection::input_limit() const noexcept {
  // A whole request of the largest allowed size, and room for the next one's first bytes.
  return ctx_.opts.limits.max_head + ctx_.opts.limits.max_body + read_chunk;
}

bool connection::can_read_more() const noexcept {
  return maybe_readable_ && !peer_closed_ && takes_input() &&
         in_.can_take(read_chunk, input_limit());
}

// After an incomplete parse, parsing again only helps once the body has reached the length the
// parser named (all of a Content-Length body; the next step of a chunked one), or once a CR or
// LF arrived where the parser waits for a line end (head incomplete, or a chunked body's framing
// line), or (head incomplete) once the request line's limit was passed; the first look at a
// request always parses, so junk is refused at once. A request that trickles in is therefore not
// parsed again for every few bytes, which would be quadratic in its size. A CR counts as it
// arrives, and so does the byte after a CR that ended the last look: a bare CR is refused then,
// not after the header timeout.
bool connection::worth_parsing() const noexcept {
  if (!has_input()) return false;
  const std::string_view buffer = in_.view();
  if (parsed_upto_ == 0 || buffer.size() < parsed_upto_ || peer_closed_) return true;
  // Nothing new since the last look: the answer would be the same.
  if (buffer.size() == parsed_upto_) return false;
  if (needed_ > 0 && buffer.size() >= needed_) return true;
  if (needed_ > 0 && !awaits_line_) return false;
  if (needed_ == 0 && buffer.size() > ctx_.opts.limits.max_request_line) return true;
  return buffer.substr(parsed_upto_ - 1).find_first_of("\r\n") != std::string_view::npos;
}

bool connection::has_ready_work() const noexcept {
  return takes_requests() && (worth_parsing() || can_read_more());
}

short connection::interest() const noexcept {
  if (closed()) return 0;
  if (state_ == conn_state::lingering) return static_cast<short>(POLLIN | io_->crossed());
  short events = static_cast<short>((has_output() ? POLLOUT : 0) | io_->crossed());
  if (!peer_closed_ && takes_input() && in_.can_take(read_chunk, input_limit())) events |= POLLIN;
  return events;
}

steady_clock::time_point connection::deadline() const noexcept {
  const options& o = ctx_.opts;
  steady_clock::time_point d;
  switch (state_) {
    case conn_state::closed:
      return steady_clock::time_point::max();  // nothing left to time
    case conn_state::proxy_header:
    case conn_state::handshake:  // both from the accept; due at once at the stop
      d = stopping_ ? last_activity_ : head_started_ + o.header_timeout;
      break;
    case conn_state::job:
      d = steady_clock::time_point::max();  // the store's own timeouts bound the job
      break;
    case conn_state::lingering:
      d = linger_until_;
      break;
    case conn_state::serving:
      d = serving_deadline();
      break;
  }
  return stopping_ ? std::min(d, grace_deadline_) : d;
}

steady_clock::time_point connection::serving_deadline() const noexcept {
  const options& o = ctx_.opts;
  steady_clock::time_point d;
  if (has_output()) {
    d = last_activity_ + o.write_timeout;
  } else if (has_input()) {
    d = head_started_ + o.header_timeout;
  } else if (stopping_) {
    // Idle while stopping: due now. A trusted peer's connection waits instead, until its next
    // request (answered with Connection: close) or its close, within the grace period: a
    // balancer may be sending a request into it at this moment.
    d = trusted_peer_ ? grace_deadline_ : last_activity_;
  } else if (trusted_peer_ && o.trust_idle_timeout) {
    d = o.trust_idle_timeout->count() == 0 ? steady_clock::time_point::max()
                                           : last_activity_ + *o.trust_idle_timeout;
  } else {
    d = last_activity_ + o.idle_timeout;
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Events

void connection::on_io(bool readable, bool writable, steady_clock::time_point now) {
  if (closed()) return;
  // A TLS read that waits for the socket to be writable, or a write that waits for it to be
  // readable, goes on when that readiness comes.
  const short crossed = io_->crossed();
  if (writable && (crossed & POLLOUT) != 0) readable = true;
  if (readable && (crossed & POLLIN) != 0) writable = true;
  if (readable) {
    maybe_readable_ = true;
    if (state_ == conn_state::lingering) {
      drain_lingering();
      return;
    }
    if (state_ == conn_state::proxy_header) {
      read_proxy_header(now);
      if (state_ == conn_state::proxy_header || closed()) return;
    }
    if (takes_input()) read_input(now);
    if (closed()) return;
  }
  // An error or hang-up while sending shows as a failed write in flush().
  if (writable && has_output()) flush(now);
}

void connection::on_deadline(steady_clock::time_point now) {
  if (closed() || now < deadline()) return;
  switch (state_) {
    case conn_state::closed:
      return;
    case conn_state::proxy_header:
      // No request has begun: at the stop the connection just closes; otherwise the header is
      // late, which counts as an error of the header.
      if (!stopping_) ctx_.counters.proxy_header_error();
      close();
      return;
    case conn_state::handshake:
      if (!stopping_) tls_->set_failure(tls_failure::timeout);
      close();
      return;
    case conn_state::job:        // the grace period is over
    case conn_state::lingering:  // the linger time is over, or the grace period
      close();
      return;
    case conn_state::serving:
      break;
  }
  // Ordered: each test assumes the ones before it failed, so the first and last both close.
  // NOLINTNEXTLINE(bugprone-branch-clone)
  if ((stopping_ && now >= grace_deadline_) || has_output()) {
    close();  // grace over, or a client that reads nothing
  } else if (has_input()) {
    fail_request(408, "The request took too long to arrive.");
    flush(now);
  } else if (stopping_) {
    // Idle while stopping (at the stop, or once the answer in flight then is sent). A request
    // may have arrived that nobody read yet (say, on a connection that waited in a queue): it
    // counts as in flight and is answered with Connection: close. Otherwise close now.
    maybe_readable_ = true;
    read_input(now);
    if (!closed() && !has_input()) close();
  } else {
    close();  // idle keep-alive
  }
}

void connection::on_stop(steady_clock::time_point now, steady_clock::time_point grace_deadline) {
  if (stopping_) return;
  stopping_ = true;
  grace_deadline_ = grace_deadline;
  // An idle trusted connection stays (deadline()); a request that already arrived in it is
  // read by the next serve() and answered with Connection: close.
  if (trusted_peer_) maybe_readable_ = true;
  on_deadline(now);
}

std::optional<steady_clock::time_point> connection::waiting_on_client_since() const noexcept {
  if (state_ == conn_state::closed || state_ == conn_state::lingering ||
      state_ == conn_state::job || has_output() || close_after_write_) {
    return std::nullopt;
  }
  if (state_ != conn_state::serving) return head_started_;  // PROXY header, handshake: accept
  if (has_input()) {
    // needed_ > 0: the head is complete and its body on its way.
    if (needed_ > 0) return std::nullopt;
    return head_started_;
  }
  return last_activity_;
}

void connection::shed(steady_clock::time_point now) {
  if (closed()) return;
  shed_state state = shed_state::idle;
  if (state_ == conn_state::proxy_header) {
    state = shed_state::proxy_header;
    ctx_.counters.proxy_header_error();
  } else if (state_ == conn_state::handshake) {
    state = shed_state::handshake;
    tls_->set_failure(tls_failure::timeout);
  } else if (has_input()) {
    state = shed_state::head;
  }
  ctx_.counters.connection_shed(static_cast<std::size_t>(state));
  if (state == shed_state::head) {
    fail_request(408, "The server is busy, and the request was slow to arrive.");
    flush(now);  // one write (nothing else is pending), then the lingering close reads away
  }
  close();
}

void connection::job_done(http::response r) {
  job_pending_ = false;
  if (closed()) return;  // closed while its job ran (grace deadline, write error)
  enter(conn_state::serving);
  respond(pending_, std::move(r));
}

// ---------------------------------------------------------------------------------------------
// Reading

void connection::read_input(steady_clock::time_point now) {
  const std::size_t limit = input_limit();
  for (;;) {
    // A full buffer holds more than any acceptable request; serve() answers what it holds.
    if (!in_.make_room(read_chunk, limit)) return;
    const std::size_t room = in_.room();
    const io_result r = io_->read(in_.tail(), room);
    if (tls_ && !handshake_counted_) note_handshake();
    if (r.status == io_status::ok) {
      if (in_.empty()) head_started_ = now;
      in_.commit(r.bytes);
      last_activity_ = now;
      // Drained: the next arrival is a new readiness; unless the client's end is known to be
      // queued, which no readiness will announce again.
      if (r.bytes < room && !peer_end_queued_) break;
      continue;
    }
    if (r.status == io_status::again) break;
    maybe_readable_ = false;
    if (tls_ && tls_->failed() && tls_->failure() == tls_failure::plaintext) {
      answer_plaintext(now);
      return;
    }
    if (r.status == io_status::eof) {
      peer_closed_ = true;
      if (!has_input() && !has_output() && !job_pending_) close();  // the client is done
    } else {
      close();
    }
    return;
  }
  maybe_readable_ = false;
}

void connection::note_handshake() noexcept {
  if (!tls_->established()) return;
  handshake_counted_ = true;
  ctx_.counters.tls_handshake_done(tls_->resumed());
  if (state_ == conn_state::handshake) enter(conn_state::serving);
}

void connection::answer_plaintext(steady_clock::time_point now) {
  // No handshake any more: the 400 is written, then the connection lingers as after any final
  // answer (a failed handshake is still counted, by close()).
  if (state_ == conn_state::handshake) enter(conn_state::serving);
  io_ = &socket_;  // the answer goes out unencrypted
  out_.assign(plaintext_response);
  ctx_.counters.record_response(400, plaintext_response.size());
  if (ctx_.log) ctx_.log->record(peer_.text(), "-", 400, 40);
  close_after_write_ = true;
  discarded_input_ = true;  // the request's bytes are read away: the connection lingers
  maybe_readable_ = true;
  flush(now);
}

void connection::drain_lingering() {
  if (read_away(*io_) == io_status::again) {
    maybe_readable_ = false;
    return;
  }
  close();  // the client closed (or reset): it has our answer
}

// ---------------------------------------------------------------------------------------------
// The PROXY header
//
// The connection's first state for a trusted peer under --proxy-protocol, before any request
// and before anything a layer on the socket would read: a TLS transport's handshake comes
// after the header (the proxy relays the client's bytes, handshake included, behind it). So the
// header is read from the raw socket (socket_), never through io_, and only up to its last
// byte: each read peeks first, lets the parser say where the header ends, and takes exactly
// the bytes that belong to it. Whatever follows stays in the socket as the first bytes of the
// layer or of the first request. The parser's `incomplete` means that every byte passed is
// header, so taking all that was peeked is right then, and the socket is left drained (no
// level-triggered driver spins on bytes left behind). A short peek means drained, as a short
// read does (transport.hpp). Errors close the connection without an answer (the peer is a
// proxy speaking the wrong protocol, not a client to tell) and count in
// spoold_proxy_header_errors_total; --header-timeout bounds the state from the accept.

void connection::read_proxy_header(steady_clock::time_point now) {
  for (;;) {
    const std::size_t had = proxy_bytes_.size();
    const std::size_t want = http::max_proxy_header - had;
    proxy_bytes_.resize(http::max_proxy_header);
    const io_result r = socket_.peek(proxy_bytes_.data() + had, want);
    if (r.status != io_status::ok) {
      proxy_bytes_.resize(had);
      if (r.status == io_status::again) {
        maybe_readable_ = false;
        return;
      }
      fail_proxy_header();  // closed or reset before the header ended: truncated
      return;
    }
    const http::proxy_header_result res =
        http::parse_proxy_header(std::string_view(proxy_bytes_.data(), had + r.bytes));
    if (res.status == http::proxy_status::error) {
      fail_proxy_header();
      return;
    }
    const std::size_t take =
        res.status == http::proxy_status::complete ? res.length - had : r.bytes;
    // The same bytes again, now taken: nothing else reads this socket in between.
    const io_result got = socket_.read(proxy_bytes_.data() + had, take);
    if (got.status != io_status::ok || got.bytes != take) {
      fail_proxy_header();
      return;
    }
    proxy_bytes_.resize(had + take);
    last_activity_ = now;
    if (res.status == http::proxy_status::complete) {
      std::optional<ip_address> source;
      if (res.has_source) source = ip_address{res.source};
      proxy_header_done(source, now);
      return;
    }
    if (r.bytes < want && !peer_end_queued_) {
      maybe_readable_ = false;  // drained: the rest of the header is a new readiness
      return;
    }
  }
}

void connection::proxy_header_done(const std::optional<ip_address>& source,
                                   steady_clock::time_point now) {
  enter(after_proxy_header());
  std::string().swap(proxy_bytes_);
  maybe_readable_ = true;  // the first request may be in the socket behind the header
  if (!source) return;     // LOCAL or UNKNOWN: the peer (a trusted proxy) is the client
  proxied_client_ = source;
  if (ctx_.log) proxied_text_ = source->text();
  // The named client is counted as if it had connected itself; the trusted peer never was.
  if (ctx_.clients == nullptr || ctx_.clients->open(client_key_of(*source), slot_)) return;
  // Past its limit: the 429 every refused connection gets, then the lingering close. The
  // connection was counted as opened and is closed as usual.
  count_refusal(ctx_, refusal_reason::per_client);
  out_.assign(refusal_response(refusal_reason::per_client));
  close_after_write_ = true;
  discarded_input_ = true;
  flush(now);
}

void connection::fail_proxy_header() noexcept {
  ctx_.counters.proxy_header_error();
  close();
}

// ---------------------------------------------------------------------------------------------
// Requests

void connection::serve(int max_requests, steady_clock::time_point now) {
  if (state_ == conn_state::proxy_header) {
    if (maybe_readable_) read_proxy_header(now);
    if (state_ == conn_state::proxy_header || closed()) return;
  }
  int served = 0;
  while (takes_requests()) {
    if (!worth_parsing()) {
      // Bytes may be left in the socket: input was not taken while a job ran or output was
      // backed up, or a read stopped at a full buffer. Take them before deciding anything.
      if (!can_read_more()) break;
      read_input(now);
      if (closed()) return;
      if (!worth_parsing()) break;
    }
    if (served == max_requests) break;  // has_ready_work() says there is more
    http::request& req = driver_.request;
    const std::string_view buffer = in_.view();
    const http::parse_result res = http::parse_request(buffer, ctx_.opts.limits, req);
    parsed_upto_ = buffer.size();
    needed_ = res.needed;
    awaits_line_ = res.awaits_line;
    if (res.status == http::parse_status::incomplete) {
      if (res.needs_continue && !continue_sent_) {
        set_nodelay();  // the answer follows in a second write
        out_.append(continue_response);
        continue_sent_ = true;
      }
      if (peer_closed_) {
        in_.clear();  // half a request, and no more coming
      } else if (!in_.can_take(read_chunk, input_limit())) {
        // The parser refuses a request this large before it fills the buffer; were it ever
        // not to, waiting for input that cannot be stored would stall the connection.
        fail_request(431, "The request is too large.");
      }
      continue;
    }
    ++served;
    if (res.status == http::parse_status::error) {
      fail_request(res.error_status, res.error_reason);
      break;
    }
    answer(req, res.consumed, now);
  }
  flush(now);
}

void connection::answer(http::request& req, std::size_t consumed, steady_clock::time_point now) {
  request_info info;
  info.version_minor = req.version_minor;
  info.keep_alive = req.keep_alive;
  if (ctx_.log) {
    info.log_line.reserve(req.method_text.size() + req.target.size() + 10);
    info.log_line.append(req.method_text).append(" ").append(req.target);
    info.log_line.append(req.version_minor == 0 ? " HTTP/1.0" : " HTTP/1.1");
  }
  // A trusted peer (a proxy) is not limited itself; the client it names is, and is logged:
  // under --proxy-protocol the PROXY header's source (X-Forwarded-For is ignored then, and a
  // LOCAL or UNKNOWN header leaves the peer unlimited), otherwise X-Forwarded-For's last
  // address. X-Forwarded-For from any other peer is the client's own word, and ignored. Without
  // --trust and --rate-limit no request needs the client's address.
  std::optional<ip_address> client;
  if (proxied_client_) {
    client = proxied_client_;
    if (ctx_.log) info.client = proxied_text_;
  } else if (trusted_peer_) {
    if (!ctx_.opts.proxy_protocol) client = forwarded_for(req);
    if (ctx_.log && client) info.client = client->text();
  } else if (rate_limited()) {
    client = peer_.ip();
  }
  handled h;
  if (const std::uint32_t wait = rate_wait(client, now); wait > 0) {
    // Answered, not dropped: the connection stays usable for when the client has a token.
    h.response = http::error_response(429, "Too many requests from your address; slow down.");
    h.response.add_header("Retry-After", std::to_string(wait));
    ctx_.counters.request_rate_limited();
  } else {
    h = ctx_.application.handle(req);
  }
  // The job owns copies of what it needs from the request: its bytes may go now.
  in_.consume(consumed);
  if (has_input()) head_started_ = now;
  continue_sent_ = false;
  parsed_upto_ = 0;
  needed_ = 0;
  awaits_line_ = false;
  if (h.blocking) {
    std::optional<http::response> r = driver_.run_job(*this, std::move(h.blocking));
    if (!r) {
      enter(conn_state::job);
      job_pending_ = true;
      pending_ = std::move(info);
      return;
    }
    h.response = std::move(*r);
  }
  respond(info, std::move(h.response));
}

bool connection::rate_limited() const noexcept {
  return ctx_.clients != nullptr && ctx_.opts.rate_limit > 0;
}

std::uint32_t connection::rate_wait(const std::optional<ip_address>& client,
                                    steady_clock::time_point now) {
  if (!client || !rate_limited()) return 0;
  return ctx_.clients->take_token(client_key_of(*client), now);
}

void connection::fail_request(int status, std::string_view reason) {
  request_info info;
  info.keep_alive = false;
  if (ctx_.log) info.log_line = "-";
  respond(info, http::error_response(status, reason));
  in_.clear();  // the rest of the stream cannot be trusted
  parsed_upto_ = 0;
  needed_ = 0;
  awaits_line_ = false;
  discarded_input_ = true;
}

void connection::respond(const request_info& info, http::response r) {
  // A draining server closes each connection after its next answer, rather than while it is
  // idle, when a client (a balancer reusing it) may be sending a request.
  const bool keep = info.keep_alive && !r.close && !stopping() && !ctx_.application.draining();
  const int status = r.status;
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
  // A connection that lives on gets its next answer without waiting on Nagle's algorithm; one
  // that closes after a single write does not need the system call.
  if (keep) set_nodelay();
  ctx_.counters.record_response(status, bytes);
  if (ctx_.log) {
    ctx_.log->record(info.client.empty() ? peer_.text() : info.client, info.log_line, status,
                     body_bytes);
  }
  if (!keep) close_after_write_ = true;
}

void connection::set_nodelay() noexcept {
  if (nodelay_) return;
  socket_.set_nodelay();
  nodelay_ = true;
}

// ---------------------------------------------------------------------------------------------
// Writing and closing

void connection::flush(steady_clock::time_point now) {
  if (closed()) return;
  while (out_sent_ < out_.size()) {
    const io_result r =
        io_->write(out_.data() + out_sent_, out_.size() - out_sent_, file_.has_value());
    if (r.status == io_status::ok) {
      out_sent_ += r.bytes;
      last_activity_ = now;
      continue;
    }
    if (r.status != io_status::again) close();
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
    const io_result r = io_->send_file(
        f.file_fd, f.file_offset,
        static_cast<std::size_t>(std::min<std::uint64_t>(f.file_length, file_chunk)));
    if (r.status == io_status::ok) {
      f.file_length -= r.bytes;
      last_activity_ = now;
      continue;
    }
    if (r.status != io_status::again) close();
    return;
  }
  if (close_after_write_) {
    if (state_ != conn_state::lingering) finish_or_linger(now);
  } else if (peer_closed_ && !has_input() && !job_pending_) {
    close();  // the client is done and has every answer
  }
}

void connection::finish_or_linger(steady_clock::time_point now) {
  // Unread request bytes (an error response, or requests after Connection: close, in the buffer
  // or still in the socket) would make close() send a reset that can destroy our last response
  // in flight; read them away first.
  if (peer_closed_ || (!has_input() && !discarded_input_ && !maybe_readable_)) {
    close();
    return;
  }
  if (!io_->shutdown_write()) {
    close();
    return;
  }
  enter(conn_state::lingering);
  linger_until_ = now + linger_time;
  in_.clear();
  drain_lingering();
}

}  // namespace spoold
