// TLS for spoold (OpenSSL): the server's certificate and settings (tls_context) and the
// transport that encrypts one connection (tls_transport, transport.hpp's contract).
//
// Settings, fixed: TLS 1.2 and 1.3 only; for 1.2 ECDHE key exchange with AEAD ciphers only
// (AES-GCM, ChaCha20-Poly1305), for 1.3 OpenSSL's default suites; the server's cipher order
// wins; no renegotiation. ALPN: the server speaks http/1.1 alone. A client that offers ALPN
// without http/1.1 (an h2-only client) fails the handshake with the no_application_protocol
// alert (RFC 7301, section 3.2) rather than getting HTTP/1.1 answers it did not ask for; a client
// that offers no ALPN at all gets HTTP/1.1. Resumption: session tickets (1.2 and 1.3) and a
// server-side session cache, both per tls_context (server/README.md, "TLS").
//
// Reload (SIGHUP): reload() reads the certificate and key again into a new SSL_CTX and makes it
// current; connections keep the SSL_CTX they started with (OpenSSL counts its references), new
// handshakes get the new one. The ticket keys pass to the new SSL_CTX, so tickets issued before
// a reload still resume after it. A file that cannot be loaded leaves the current one in place.
//
// Processes (forking, preforked): a child forked after a reload has the new SSL_CTX. A child
// forked before it (a preforked worker) finds the certificate and key that the reload loaded in
// shared memory, and loads them before its next handshake. The mutex is held across fork()
// (pthread_atfork), so no child starts with it locked by a thread that does not exist there.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "app/metrics.hpp"
#include "conn/transport.hpp"
#include "shared_mapping.hpp"

namespace spoold {

// Why a handshake failed: the label of spoold_tls_handshake_failures_total{reason=...}.
enum class tls_failure : std::uint8_t {
  closed,     // the client closed or reset the connection before the handshake ended
  timeout,    // the handshake took longer than --header-timeout
  plaintext,  // the client sent plain HTTP to the TLS port
  protocol,   // no common version or cipher (TLS 1.1 and older, say), or a malformed handshake
  alpn,       // the client offered ALPN without http/1.1
};
static_assert(static_cast<std::size_t>(tls_failure::alpn) + 1 == tls_failure_reasons &&
              tls_failure_names[static_cast<std::size_t>(tls_failure::plaintext)] == "plaintext");

// A certificate chain and its key, PEM; the names are the files', for messages.
struct pem_pair {
  std::string cert;
  std::string key;
  std::string cert_name;
  std::string key_name;
};

class tls_context {
 public:
  // Loads the certificate chain (PEM) and its private key. Throws std::runtime_error naming the
  // file and OpenSSL's reason.
  tls_context(std::string cert_file, std::string key_file);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  // Loads the files again. Returns "" when the new certificate is in use, else why not (the
  // current one stays).
  std::string reload();

  // A server-side SSL object for `fd`, of the current SSL_CTX; nullptr when out of memory.
  [[nodiscard]] SSL* new_ssl(int fd);

  // pthread_atfork's handlers (tls.cpp).
  void lock_for_fork() { mu_.lock(); }
  void unlock_after_fork_in_parent() { mu_.unlock(); }
  void reset_after_fork_in_child() { new (&mu_) std::mutex(); }

  // The most bytes of certificate chain and key together.
  static std::size_t pem_capacity() noexcept;

 private:
  struct shared_pem;

  void publish(const pem_pair& pem);                     // into shared_
  void install(SSL_CTX* fresh, std::uint64_t sequence);  // makes it current_
  void catch_up();  // loads what shared_ holds (a process forked before a reload)
  // The current SSL_CTX with a reference for the caller; nullptr if a reload in another process
  // has not been caught up with.
  SSL_CTX* current_ctx();

  std::string cert_file_;
  std::string key_file_;
  std::mutex mu_;  // guards current_ and loaded_sequence_
  SSL_CTX* current_ = nullptr;
  // The PEM bytes in use, shared by every process forked from this one (tls.cpp), and the
  // sequence count of the bytes this process's current_ was made from.
  shared_mapping<shared_pem> shared_;
  std::uint64_t loaded_sequence_ = 0;
};

// A TLS layer over a non-blocking socket that someone else owns (the connection's
// socket_transport closes it). The handshake runs inside the first read. The SSL reads and
// writes the socket through a BIO of spoold's (recv, send with MSG_NOSIGNAL: no SIGPIPE), which
// tells the transport whether the socket was drained.
//
// Level-triggered drivers: a read may need the socket writable (the handshake's answer, a
// session ticket that did not fit) and a write may need it readable; crossed() says which,
// after an `again`.
class tls_transport final : public transport {
 public:
  // Takes ownership of `ssl` (from tls_context::new_ssl), attached to `fd`; its handshake may
  // have ended already (the queue model's handshake stage).
  tls_transport(int fd, SSL* ssl) noexcept;
  ~tls_transport() override;

  io_result read(char* into, std::size_t size) noexcept override;
  io_result write(const char* from, std::size_t size, bool more) noexcept override;
  io_result send_file(int file_fd, std::uint64_t& offset, std::size_t size) noexcept override;
  bool shutdown_write() noexcept override;
  // Sends close_notify if the session is sound and has not sent it yet (before the owner closes
  // the socket), best effort: a socket that cannot take it now does not get it.
  void close_notify() noexcept;
  [[nodiscard]] short crossed() const noexcept override { return crossed_; }

  // The handshake is done (the first read past it returned).
  [[nodiscard]] bool established() const noexcept { return established_; }
  // Drives the handshake alone: ok once it has ended; again (crossed() says if it waits for
  // the socket to be writable rather than readable); eof or error when it failed (failure()).
  io_status handshake() noexcept;
  // Gives up the SSL object (to be layered again on the same socket elsewhere).
  [[nodiscard]] SSL* release() noexcept {
    SSL* s = ssl_;
    BIO_set_data(SSL_get_rbio(s), nullptr);
    ssl_ = nullptr;
    return s;
  }
  // From the socket's BIO (tls.cpp): the last recv returned less than asked (or nothing).
  void note_socket_read(bool drained) noexcept { socket_drained_ = drained; }
  // The handshake resumed an earlier session (a ticket or the session cache).
  [[nodiscard]] bool resumed() const noexcept { return SSL_session_reused(ssl_) == 1; }
  // Why the handshake failed; set once read() has returned eof or error before established().
  [[nodiscard]] bool failed() const noexcept { return failed_; }
  [[nodiscard]] tls_failure failure() const noexcept { return failure_; }
  void set_failure(tls_failure f) noexcept {
    failed_ = true;
    failure_ = f;
  }

 private:
  // `again`, `eof` or `error` for SSL call result `rc`, noting what the call waits for.
  io_status classify(int rc, short own_direction) noexcept;

  SSL* ssl_;
  short crossed_ = 0;
  bool established_ = false;
  bool failed_ = false;
  bool broken_ = false;          // a fatal error: OpenSSL forbids SSL_shutdown from then on
  bool notified_ = false;        // close_notify sent
  bool socket_drained_ = false;  // note_socket_read()
  tls_failure failure_ = tls_failure::closed;
  // send_file's bytes: the file range [file_at_, file_at_ + file_len_) read and not yet accepted
  // by SSL_write. A write that returned `again` must be repeated with the same bytes, so they
  // are kept until SSL_write takes them.
  std::unique_ptr<char[]> file_buf_;
  std::uint64_t file_at_ = 0;
  std::size_t file_len_ = 0;
  int file_fd_ = -1;
};

}  // namespace spoold
