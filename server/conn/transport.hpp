// Every byte a connection reads or writes goes through its transport. Today that is the plain
// socket (socket_transport), which the connection holds in place; a transport that encrypts is
// layered on that socket and takes its place behind the same calls.
//
// Contract, for every implementation:
//  - Calls never wait: the socket is non-blocking. `again` means "nothing can move now"; the
//    driver waits for the socket's next readiness and the connection calls again.
//  - read() returning fewer bytes than asked means the transport holds nothing more right now.
//    The epoll model relies on it (edge-triggered: a short read stands for "drained", so no
//    second read that would only say EAGAIN). A transport that hands out less than it has
//    buffered (a TLS record at a time) keeps reading until the buffer is full or it would block.
//    "Nothing more" means no more bytes: the peer's end of stream (its FIN, or a TLS
//    close_notify) may still be queued behind them, and shows only on the next read. A short
//    read therefore cannot tell an edge-triggered driver that the end was seen; the epoll model
//    learns that one is queued from EPOLLRDHUP, and the connection then reads on until it sees
//    it (connection::on_peer_end).
//  - One virtual call per read or write, never per byte: next to the system call it stands for,
//    its cost does not show.
//
// How an encrypting transport fits (OpenSSL's non-blocking SSL_read/SSL_write):
//  - SSL_ERROR_WANT_READ and SSL_ERROR_WANT_WRITE both become `again`; the handshake runs inside
//    the first read or write. A read that needs the socket writable (or a write that needs it
//    readable) tells the driver which readiness it waits for through crossed(), which the
//    connection's interest() adds for level-triggered drivers. The epoll model registers
//    every socket for both directions already, and retries both on any edge.
//  - send_file() cannot use sendfile(2): it reads the file range into a buffer (pread) and
//    writes that, returning the bytes the peer accepted.
//  - shutdown_write() sends close_notify before shutting the socket's sending side.
//  - The connection's constructor is where an accepted socket gets its layer (tls.hpp): the
//    connection keeps owning the socket (socket_transport closes it) and points its `io_` at
//    the layer, which reads and writes the socket itself; the listener that accepted the socket
//    is what decides (accepted::tls).
#pragma once

#include <cstddef>
#include <cstdint>

namespace spoold {

enum class io_status : std::uint8_t {
  ok,     // `bytes` moved (more than zero)
  again,  // nothing can move until the socket is ready again
  eof,    // read: the peer closed its sending side
  error,  // the connection is broken (reset, or the file under a body shrank)
};

struct io_result {
  io_status status = io_status::ok;
  std::size_t bytes = 0;
};

class transport {
 public:
  virtual ~transport() = default;
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

  // The socket, for the driver's poll() or epoll set; -1 once closed.
  [[nodiscard]] int fd() const noexcept { return fd_; }

  virtual io_result read(char* into, std::size_t size) noexcept = 0;
  // `more`: further bytes follow at once (a file body after a head), so a partial packet may wait.
  virtual io_result write(const char* from, std::size_t size, bool more) noexcept = 0;
  // Up to `size` bytes of the open file `file_fd` from `offset`, which is advanced.
  virtual io_result send_file(int file_fd, std::uint64_t& offset, std::size_t size) noexcept = 0;
  // No more bytes will be written (after the last response); false if the socket refused.
  virtual bool shutdown_write() noexcept = 0;
  // After an `again`: the readiness the transport waits for beyond the call's own direction,
  // as poll() events. POLLOUT: a read waits for the socket to be writable (a TLS handshake's
  // answer); POLLIN: a write waits for it to be readable. 0 for a plain socket.
  [[nodiscard]] virtual short crossed() const noexcept { return 0; }

  // Answers leave at once instead of waiting on Nagle's algorithm. Best effort.
  void set_nodelay() noexcept;
  void close() noexcept;

 protected:
  explicit transport(int fd) noexcept : fd_(fd) {}
  int fd_;
};

// A plain TCP socket: recv, send (MSG_NOSIGNAL), sendfile.
class socket_transport final : public transport {
 public:
  explicit socket_transport(int fd) noexcept : transport(fd) {}
  ~socket_transport() override { close(); }

  io_result read(char* into, std::size_t size) noexcept override;
  io_result write(const char* from, std::size_t size, bool more) noexcept override;
  io_result send_file(int file_fd, std::uint64_t& offset, std::size_t size) noexcept override;
  bool shutdown_write() noexcept override;
  // read() without taking the bytes: they stay in the socket for the next read. Only the
  // PROXY header state uses it, on the raw socket before any layer (connection.cpp).
  io_result peek(char* into, std::size_t size) noexcept;
};

// Reads and discards what `t` holds until it has nothing more now: `again` (the client may
// still send), or `eof` or `error` once the client has closed or reset. The lingering close
// after a final answer reads with it (connection.cpp, the queue model's handshake stage).
io_status read_away(transport& t) noexcept;

}  // namespace spoold
