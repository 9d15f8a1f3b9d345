// The default model: one event loop per core, each with its own SO_REUSEPORT listening socket,
// and libspool for everything that may block (store calls). See server/models/README.md for
// the connection states and why no request is lost at shutdown.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "http/parser.hpp"
#include "models/model.hpp"
#include "net.hpp"

namespace spoold {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::size_t read_chunk = 16 * 1024;
// Past this much unsent output a connection stops parsing pipelined requests until it drains.
constexpr std::size_t output_high_water = 256 * 1024;
// Requests one connection may complete per turn before the others get theirs.
constexpr int requests_per_turn = 32;
// Connections accepted per turn. The listening socket is level-triggered, so the rest wait for
// the next turn: a burst of new connections cannot starve the requests of established ones.
constexpr int accepts_per_turn = 64;
constexpr auto sweep_interval = std::chrono::milliseconds(100);
// How long a closing connection keeps reading (and discarding) what the client still sends, so
// that closing does not reset the connection before the client has read our last response.
constexpr auto linger_time = std::chrono::seconds(2);

// What a response needs from its request once the request's bytes are gone.
struct request_info {
  int version_minor = 1;
  bool keep_alive = true;
  std::string log_line;  // "GET /x HTTP/1.1", only when access logging is on
};

// Request bytes: grows by doubling and never zero-fills what recv is about to overwrite.
struct input_buffer {
  std::unique_ptr<char[]> bytes;
  std::size_t capacity = 0;

  [[nodiscard]] std::size_t size() const { return capacity; }
  [[nodiscard]] char* data() { return bytes.get(); }
  void grow(std::size_t new_capacity, std::size_t used) {
    auto bigger = std::make_unique_for_overwrite<char[]>(new_capacity);
    if (used > 0) std::memcpy(bigger.get(), bytes.get(), used);
    bytes = std::move(bigger);
    capacity = new_capacity;
  }
};

struct connection {
  int fd = -1;
  sockaddr_in peer{};
  input_buffer in;
  std::size_t in_start = 0;
  std::size_t in_end = 0;
  std::string out;
  std::size_t out_sent = 0;
  std::optional<http::response> file;  // a file body still being sent
  request_info pending;                // for the request whose blocking job is running
  clock::time_point head_started{};    // first byte of the request being received
  clock::time_point last_activity{};
  clock::time_point linger_until{};
  bool job_pending = false;
  bool close_after_write = false;  // the last response said Connection: close
  bool lingering = false;          // our side is shut; reading until the client closes
  bool peer_closed = false;        // the client shut its side (read returned 0)
  bool continue_sent = false;
  // How far the last incomplete parse got, so a request that trickles in is not parsed again
  // for every few bytes (that would be quadratic in the head's size): bytes of the request
  // already looked at, and the length at which its body is complete (0: head incomplete).
  std::size_t parsed_upto = 0;
  std::size_t needed = 0;
  bool nodelay = false;
  bool output_stalled = false;  // serve() stopped for output to drain, with requests waiting  // TCP_NODELAY set: only once the connection is kept alive
  // The socket may hold bytes we have not read: set by an input edge, cleared by a short read
  // or EAGAIN. Without it every request would cost a second recv that returns EAGAIN.
  bool readable = false;
  bool discarded_input = false;  // an error response threw away unread request bytes
  bool queued = false;           // on the loop's ready list
  bool dead = false;             // unlinked; deleted at the end of the loop's turn
  connection* prev = nullptr;
  connection* next = nullptr;

  [[nodiscard]] bool has_input() const { return in_end > in_start; }
  [[nodiscard]] bool has_output() const { return out_sent < out.size() || file.has_value(); }
};

struct completion {
  connection* conn;
  http::response response;
};

class epoll_model;

class event_loop {
 public:
  event_loop(epoll_model& model, server_context& ctx, int listen_fd, int index);
  ~event_loop();
  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;

  void start() { thread_ = std::thread([this] { run(); }); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  void request_stop();
  // From a pool worker: the blocking job of `c` produced `r`.
  void complete(connection* c, http::response r);

 private:
  void run();
  void accept_all();
  void drain_completions();
  void on_event(connection* c, std::uint32_t events);
  void read_input(connection* c);
  void serve(connection* c);
  void dispatch(connection* c, http::request& req, handled h);
  void respond(connection* c, const request_info& info, http::response r);
  void flush(connection* c);
  void finish_or_linger(connection* c);
  void close_connection(connection* c);
  void free_if_unreferenced(connection* c);
  void bury_dead();
  void close_if_idle(connection* c);
  static void set_nodelay(connection* c);
  [[nodiscard]] bool worth_parsing(const connection* c, std::string_view buffer) const;
  void sweep(clock::time_point now);
  void begin_shutdown();
  void enqueue(connection* c);
  void notify() const;
  [[nodiscard]] bool stopping() const { return stop_.load(std::memory_order_acquire); }

  epoll_model& model_;
  server_context& ctx_;
  int index_;
  int listen_fd_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  bool listening_ = true;
  bool shutdown_started_ = false;
  clock::time_point grace_deadline_{};
  clock::time_point accept_paused_until_{};
  std::atomic<bool> stop_{false};
  // Every connection object, open or closed. A closed one (fd < 0) stays listed until neither a
  // pool job nor the ready list refers to it (free_if_unreferenced), and is deleted only at the
  // end of the loop's turn (bury_dead): the turn's epoll_event array may still name it.
  connection* connections_ = nullptr;
  std::vector<connection*> dead_;
  std::size_t live_ = 0;            // open connections
  std::vector<connection*> ready_;  // connections with more pipelined work
  std::vector<connection*> ready_turn_;
  std::mutex done_mu_;
  std::vector<completion> done_;
  http::request request_;  // reused: its vectors keep their capacity
  std::thread thread_;
};

class epoll_model final : public server_model {
 public:
  explicit epoll_model(server_context& ctx) : ctx_(ctx) {}
  ~epoll_model() override {
    stop();
    wait();
  }

  std::uint16_t start() override {
    const unsigned loops = ctx_.opts.loops == 0 ? 1 : ctx_.opts.loops;
    std::uint16_t port = ctx_.opts.port;
    for (unsigned i = 0; i < loops; ++i) {
      int fd = listen_tcp(ctx_.opts.bind, port, /*reuse_port=*/true);
      if (i == 0) port = local_port(fd);
      loops_.push_back(std::make_unique<event_loop>(*this, ctx_, fd, static_cast<int>(i)));
    }
    for (auto& loop : loops_) loop->start();
    return port;
  }

  void stop() override {
    for (auto& loop : loops_) loop->request_stop();
  }

  void wait() override {
    for (auto& loop : loops_) loop->join();
  }

  // The --max-connections budget, shared by every loop.
  bool admit() {
    std::size_t open = open_.fetch_add(1, std::memory_order_relaxed);
    if (open < ctx_.opts.max_connections) return true;
    open_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  void release() { open_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  server_context& ctx_;
  std::atomic<std::size_t> open_{0};
  std::vector<std::unique_ptr<event_loop>> loops_;
};

// Tags for the two descriptors that are not connections.
char listen_tag;
char wake_tag;

void check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(errno, std::generic_category(), what);
}

event_loop::event_loop(epoll_model& model, server_context& ctx, int listen_fd, int index)
    : model_(model), ctx_(ctx), index_(index), listen_fd_(listen_fd) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  check(epoll_fd_, "epoll_create1");
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  check(wake_fd_, "eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &listen_tag;
  check(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev), "epoll_ctl listen");
  ev.data.ptr = &wake_tag;
  check(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev), "epoll_ctl eventfd");
}

event_loop::~event_loop() {
  join();
  // The pool has been drained by now (server_model::wait's contract): jobs of connections
  // closed at the grace deadline completed into done_, which owns nothing but responses.
  done_.clear();
  bury_dead();
  while (connections_ != nullptr) {
    connection* c = connections_;
    connections_ = c->next;
    if (c->fd >= 0) ::close(c->fd);
    delete c;
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

void event_loop::notify() const {
  std::uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the loop will wake anyway.
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void event_loop::request_stop() {
  stop_.store(true, std::memory_order_release);
  notify();
}

void event_loop::complete(connection* c, http::response r) {
  bool was_empty;
  {
    std::lock_guard lock(done_mu_);
    was_empty = done_.empty();
    done_.push_back({c, std::move(r)});
  }
  // One wake-up per batch: a non-empty list means a wake-up is already on its way.
  if (was_empty) notify();
}

void event_loop::run() {
  const std::string name = "spoold-loop-" + std::to_string(index_);
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
  epoll_event events[256];
  auto next_sweep = clock::now() + sweep_interval;
  for (;;) {
    int timeout_ms = ready_.empty() ? static_cast<int>(sweep_interval.count()) : 0;
    int n = ::epoll_wait(epoll_fd_, events, 256, timeout_ms);
    if (n < 0 && errno != EINTR) {
      std::perror("spoold: epoll_wait");
      break;
    }
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &listen_tag) {
        accept_all();
      } else if (tag == &wake_tag) {
        std::uint64_t count;
        [[maybe_unused]] auto r = ::read(wake_fd_, &count, sizeof count);
        drain_completions();
      } else {
        on_event(static_cast<connection*>(tag), events[i].events);
      }
    }
    // Connections that yielded after requests_per_turn requests, or were resumed.
    ready_turn_.swap(ready_);
    for (connection* c : ready_turn_) {
      c->queued = false;
      if (c->fd >= 0) serve(c);
      free_if_unreferenced(c);
    }
    ready_turn_.clear();
    // Nothing of this turn (its events, its ready list) refers to a connection any more.
    bury_dead();
    if (stopping() && !shutdown_started_) begin_shutdown();
    auto now = clock::now();
    if (now >= next_sweep) {
      sweep(now);
      next_sweep = now + sweep_interval;
    }
    if (shutdown_started_) {
      if (live_ == 0) break;
      if (now >= grace_deadline_) {
        // The grace period is over: close what is left. Pending jobs still hold their
        // connection objects; the completions are dropped with the loop.
        for (connection* c = connections_; c != nullptr;) {
          connection* next = c->next;
          if (c->fd >= 0) close_connection(c);
          c = next;
        }
        break;
      }
    }
  }
}

void event_loop::begin_shutdown() {
  shutdown_started_ = true;
  grace_deadline_ = clock::now() + ctx_.opts.grace;
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);  // also leaves the epoll set
    listen_fd_ = -1;
    listening_ = false;
  }
  // Idle connections go now; the others close after their current response (respond() stops
  // keep-alive once stopping() is true).
  for (connection* c = connections_; c != nullptr;) {
    connection* next = c->next;
    close_if_idle(c);
    c = next;
  }
}

// A connection counts as idle only if the socket holds no request either: one that arrived
// before the stop but was not read yet is served (with Connection: close), not dropped.
void event_loop::close_if_idle(connection* c) {
  if (c->fd < 0 || c->lingering || c->job_pending || c->has_input() || c->has_output()) return;
  c->readable = true;
  read_input(c);
  if (c->fd < 0) return;
  if (c->has_input()) {
    serve(c);
  } else {
    close_connection(c);
  }
}

void event_loop::accept_all() {
  if (!listening_) return;
  for (int accepted = 0; accepted < accepts_per_turn; ++accepted) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop watching the socket for a moment instead of spinning on it;
        // the sweep turns it back on. Pending connections wait in the backlog meanwhile.
        std::perror("spoold: accept4");
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        listening_ = false;
        accept_paused_until_ = clock::now() + std::chrono::milliseconds(100);
        return;
      }
      std::perror("spoold: accept4");
      return;
    }
    if (!model_.admit()) {
      ::send(fd, refused_response.data(), refused_response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      ::close(fd);
      ctx_.counters.connection_refused();
      ctx_.counters.record_response(503, refused_response.size());
      continue;
    }
    auto* c = new connection;
    c->fd = fd;
    c->peer = peer;
    c->last_activity = clock::now();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = c;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      std::perror("spoold: epoll_ctl add");
      ::close(fd);
      delete c;
      model_.release();
      continue;
    }
    c->next = connections_;
    if (connections_ != nullptr) connections_->prev = c;
    connections_ = c;
    ++live_;
    ctx_.counters.connection_opened();
  }
}

void event_loop::on_event(connection* c, std::uint32_t events) {
  if (c->fd < 0) return;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    c->readable = true;
    read_input(c);
  }
  if (c->fd < 0) return;
  if (events & EPOLLOUT) flush(c);
  if (c->fd < 0) return;
  if (!c->lingering) serve(c);
}

void event_loop::read_input(connection* c) {
  // While a job runs or output is backed up, bytes stay in the socket: that is the
  // backpressure on a client that pipelines faster than it reads. serve() reads again later.
  if (!c->lingering && (c->job_pending || c->out.size() - c->out_sent > output_high_water)) return;
  const std::size_t cap =
      ctx_.opts.limits.max_head + ctx_.opts.limits.max_body + read_chunk;
  for (;;) {
    if (c->lingering) {
      char sink[4096];
      ssize_t n = ::recv(c->fd, sink, sizeof sink, 0);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        c->readable = false;
        return;
      }
      close_connection(c);
      return;
    }
    if (c->in_start == c->in_end) c->in_start = c->in_end = 0;
    if (c->in.size() - c->in_end < read_chunk) {
      if (c->in_start > 0) {
        std::memmove(c->in.data(), c->in.data() + c->in_start, c->in_end - c->in_start);
        c->in_end -= c->in_start;
        c->in_start = 0;
      }
      if (c->in.size() - c->in_end < read_chunk) {
        if (c->in.size() >= cap) return;  // the parser rejects a request this large
        c->in.grow(std::min(cap, std::max(c->in.size() * 2, c->in_end + read_chunk)), c->in_end);
      }
    }
    const std::size_t room = c->in.size() - c->in_end;
    ssize_t n = ::recv(c->fd, c->in.data() + c->in_end, room, 0);
    if (n > 0) {
      if (c->in_start == c->in_end) c->head_started = clock::now();
      c->in_end += static_cast<std::size_t>(n);
      c->last_activity = clock::now();
      // A short read drained the socket; a later arrival raises a new edge.
      if (static_cast<std::size_t>(n) < room) {
        c->readable = false;
        return;
      }
      continue;
    }
    if (n == 0) {
      c->peer_closed = true;
      c->readable = false;
      return;
    }
    if (errno == EINTR) continue;
    c->readable = false;
    if (errno != EAGAIN) close_connection(c);
    return;
  }
}

void event_loop::serve(connection* c) {
  if (c->fd < 0 || c->lingering) return;
  int served = 0;
  for (;;) {
    if (c->job_pending || c->close_after_write) break;
    if (c->out.size() - c->out_sent > output_high_water || c->file) {
      c->output_stalled = true;  // flush() resumes once the output drained
      break;
    }
    if (!c->has_input()) {
      if (c->peer_closed || !c->readable) break;
      // Bytes left in the socket while the job ran or output was backed up.
      read_input(c);
      if (c->fd < 0) return;
      if (!c->has_input()) break;
    }
    if (served == requests_per_turn) {
      enqueue(c);
      break;
    }
    std::string_view buffer(c->in.data() + c->in_start, c->in_end - c->in_start);
    if (!worth_parsing(c, buffer)) break;
    http::parse_result res = http::parse_request(buffer, ctx_.opts.limits, request_);
    c->parsed_upto = buffer.size();
    c->needed = res.needed;
    if (res.status == http::parse_status::incomplete) {
      if (res.needs_continue && !c->continue_sent) {
        set_nodelay(c);  // the answer follows in a second write
        c->out.append("HTTP/1.1 100 Continue\r\n\r\n");
        c->continue_sent = true;
      }
      if (c->peer_closed) c->in_start = c->in_end;  // half a request, and no more coming
      break;
    }
    ++served;
    if (res.status == http::parse_status::error) {
      request_info info;
      info.keep_alive = false;
      if (ctx_.log) info.log_line = "-";
      respond(c, info, http::error_response(res.error_status, res.error_reason));
      c->in_start = c->in_end;  // the rest of the stream cannot be trusted
      c->discarded_input = true;
      break;
    }
    handled h = ctx_.application.handle(request_);
    c->continue_sent = false;
    c->parsed_upto = 0;
    c->needed = 0;
    dispatch(c, request_, std::move(h));
    c->in_start += res.consumed;
    if (c->has_input()) c->head_started = clock::now();
  }
  flush(c);
}

void event_loop::dispatch(connection* c, http::request& req, handled h) {
  request_info info;
  info.version_minor = req.version_minor;
  info.keep_alive = req.keep_alive;
  if (ctx_.log) {
    info.log_line.reserve(req.method_text.size() + req.target.size() + 10);
    info.log_line.append(req.method_text).append(" ").append(req.target);
    info.log_line.append(req.version_minor == 0 ? " HTTP/1.0" : " HTTP/1.1");
  }
  if (!h.blocking) {
    respond(c, info, std::move(h.response));
    return;
  }
  c->job_pending = true;
  c->pending = std::move(info);
  std::error_code err = ctx_.pool.try_post([this, c, job = std::move(h.blocking)]() mutable {
    http::response r;
    try {
      r = job();
    } catch (const std::exception& e) {
      r = http::error_response(500, e.what());
    }
    complete(c, std::move(r));
  });
  if (err) {
    c->job_pending = false;
    respond(c, c->pending, http::error_response(503, "The server is overloaded or stopping."));
  }
}

void event_loop::drain_completions() {
  std::vector<completion> done;
  {
    std::lock_guard lock(done_mu_);
    done.swap(done_);
  }
  for (auto& [c, response] : done) {
    c->job_pending = false;
    if (c->fd < 0) {
      free_if_unreferenced(c);  // closed while its job ran (grace deadline, write error)
      continue;
    }
    respond(c, c->pending, std::move(response));
    serve(c);  // pipelined requests behind it; also flushes
    free_if_unreferenced(c);
  }
}

void event_loop::respond(connection* c, const request_info& info, http::response r) {
  const bool keep = info.keep_alive && !r.close && !stopping();
  const std::size_t before = c->out.size();
  http::write_head(c->out, r, info.version_minor, keep);
  std::uint64_t bytes = c->out.size() - before;
  std::uint64_t body_bytes = 0;
  if (!r.head_only) {
    body_bytes = r.body_length();
    bytes += body_bytes;
    if (r.file_fd >= 0) {
      c->file.emplace(std::move(r));
    } else {
      c->out.append(r.memory_body());
    }
  }
  // A connection that lives on gets its next answer without waiting on Nagle's algorithm; one
  // that closes after a single write does not need the system call.
  if (keep) set_nodelay(c);
  ctx_.counters.record_response(r.status, bytes);
  if (ctx_.log) ctx_.log->record(format_ipv4(c->peer), info.log_line, r.status, body_bytes);
  if (!keep) c->close_after_write = true;
}

void event_loop::flush(connection* c) {
  if (c->fd < 0) return;
  while (c->out_sent < c->out.size()) {
    const int more = c->file ? MSG_MORE : 0;
    ssize_t n = ::send(c->fd, c->out.data() + c->out_sent, c->out.size() - c->out_sent,
                       MSG_NOSIGNAL | more);
    if (n > 0) {
      c->out_sent += static_cast<std::size_t>(n);
      c->last_activity = clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // EPOLLOUT (edge) resumes
    close_connection(c);
    return;
  }
  c->out.clear();
  c->out_sent = 0;
  while (c->file) {
    http::response& f = *c->file;
    if (f.file_length == 0) {
      c->file.reset();
      break;
    }
    off_t offset = static_cast<off_t>(f.file_offset);
    const std::size_t chunk = std::min<std::uint64_t>(f.file_length, 1u << 20);
    ssize_t n = ::sendfile(c->fd, f.file_fd, &offset, chunk);
    if (n > 0) {
      f.file_offset += static_cast<std::uint64_t>(n);
      f.file_length -= static_cast<std::uint64_t>(n);
      c->last_activity = clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // n == 0: the file shrank under us; the promised length cannot be kept.
    close_connection(c);
    return;
  }
  if (c->close_after_write) {
    finish_or_linger(c);
    return;
  }
  if (c->job_pending) return;
  if (c->output_stalled) {
    c->output_stalled = false;
    enqueue(c);
  } else if (!c->has_input() && c->peer_closed) {
    close_connection(c);  // the client is done and has every answer
  }
}

void event_loop::finish_or_linger(connection* c) {
  // Unread request bytes (an error response, or requests after Connection: close) would make
  // close() send a reset that can destroy our last response in flight; read them away first.
  if (c->peer_closed || (!c->has_input() && !c->discarded_input)) {
    close_connection(c);
    return;
  }
  ::shutdown(c->fd, SHUT_WR);
  c->lingering = true;
  c->linger_until = clock::now() + linger_time;
  c->in_start = c->in_end = 0;
  read_input(c);
}

// After an incomplete parse, parsing again only helps once the body is all here, or (head still
// incomplete) once a line ended or the request line's limit was passed; the first look at a
// request always parses, so junk is refused at once.
bool event_loop::worth_parsing(const connection* c, std::string_view buffer) const {
  if (c->parsed_upto == 0 || buffer.size() < c->parsed_upto || c->peer_closed) return true;
  if (c->needed > 0) return buffer.size() >= c->needed;
  if (buffer.size() > ctx_.opts.limits.max_request_line) return true;
  std::string_view fresh = buffer.substr(c->parsed_upto);
  return fresh.find('\n') != std::string_view::npos;
}

void event_loop::set_nodelay(connection* c) {
  if (c->nodelay) return;
  int one = 1;
  ::setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->nodelay = true;
}

void event_loop::enqueue(connection* c) {
  if (c->queued) return;
  c->queued = true;
  ready_.push_back(c);
}

// Closes the socket; the object lives on while a job or the ready list refers to it. Callers
// may still look at c->fd afterwards (it is -1) but nothing else.
void event_loop::close_connection(connection* c) {
  if (c->fd < 0) return;
  ::close(c->fd);  // also removes it from the epoll set
  c->fd = -1;
  c->file.reset();
  --live_;
  model_.release();
  ctx_.counters.connection_closed();
}

// Unlinks a closed connection that no job and no ready-list entry refers to. It is deleted
// later, by bury_dead() at the end of the turn: an event for it may come later in the same
// epoll_wait batch (a completion closed it, then its EPOLLIN is handled), and on_event must
// still find fd == -1 there, not freed memory.
void event_loop::free_if_unreferenced(connection* c) {
  if (c->fd >= 0 || c->job_pending || c->queued || c->dead) return;
  if (c->prev != nullptr) c->prev->next = c->next;
  if (c->next != nullptr) c->next->prev = c->prev;
  if (connections_ == c) connections_ = c->next;
  c->dead = true;
  dead_.push_back(c);
}

void event_loop::bury_dead() {
  for (connection* c : dead_) delete c;
  dead_.clear();
}

void event_loop::sweep(clock::time_point now) {
  if (!listening_ && !shutdown_started_ && listen_fd_ >= 0 && now >= accept_paused_until_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &listen_tag;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) == 0) listening_ = true;
  }
  if (ctx_.log && index_ == 0) ctx_.log->flush();  // lines reach the file within a sweep
  const auto& o = ctx_.opts;
  for (connection* c = connections_; c != nullptr;) {
    connection* next = c->next;
    if (c->fd < 0) {
      free_if_unreferenced(c);
    } else if (c->lingering) {
      if (now >= c->linger_until) close_connection(c);
    } else if (c->job_pending) {
      // The store call is bounded by its own timeouts; the connection waits for it.
    } else if (c->has_output()) {
      if (now - c->last_activity >= o.write_timeout) close_connection(c);
    } else if (c->has_input()) {
      if (now - c->head_started >= o.header_timeout) {
        request_info info;
        info.keep_alive = false;
        if (ctx_.log) info.log_line = "-";
        c->in_start = c->in_end;
        c->discarded_input = true;
        respond(c, info, http::error_response(408, "The request took too long to arrive."));
        flush(c);
      }
    } else if (shutdown_started_) {
      if (!c->queued) close_if_idle(c);
    } else if (now - c->last_activity >= o.idle_timeout) {
      close_connection(c);
    }
    c = next;
  }
}

}  // namespace

std::unique_ptr<server_model> make_epoll_model(server_context& ctx) {
  return std::make_unique<epoll_model>(ctx);
}

}  // namespace spoold
