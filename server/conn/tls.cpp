#include "conn/tls.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace spoold {
namespace {

// TLS 1.2: forward secrecy (ECDHE) and AEAD only, strongest first. TLS 1.3's suites are all
// AEAD with ephemeral keys; OpenSSL's default list is kept.
constexpr const char* tls12_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// The server-side session cache: sessions of clients that resume by session ID (those that do
// not take tickets), per SSL_CTX (so per process).
constexpr long session_cache_size = 20'000;
constexpr long session_timeout_s = 300;

// The most send_file reads from the file at once: a few TLS records.
constexpr std::size_t file_buffer_size = 64 * 1024;

constexpr unsigned char session_id_context[] = "spoold";

// ALPN "http/1.1" in wire format (a length byte, then the name).
constexpr unsigned char http11_alpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

std::string openssl_reason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char text[256];
  ERR_error_string_n(e, text, sizeof text);
  return text;
}

int select_alpn(SSL* ssl, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, http11_alpn, sizeof http11_alpn, in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  if (auto* t = static_cast<tls_transport*>(SSL_get_app_data(ssl))) {
    t->set_failure(tls_failure::alpn);
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
}

// The whole of a file; throws std::runtime_error naming `what`.
std::string read_whole(const std::string& path, const char* what) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw std::runtime_error(std::string(what) + " " + path + ": " + std::strerror(errno));
  }
  std::string out;
  char chunk[16384];
  std::size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) out.append(chunk, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw std::runtime_error(std::string(what) + " " + path + ": read error");
  return out;
}

// A configured SSL_CTX holding a certificate chain and key (PEM bytes, `names` for errors).
// Throws std::runtime_error.
SSL_CTX* make_ctx(const pem_pair& pem) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) throw std::runtime_error("SSL_CTX_new: " + openssl_reason());
  BIO* bio = nullptr;
  auto fail = [&](const std::string& what) {
    const std::string why = openssl_reason();
    BIO_free(bio);
    SSL_CTX_free(ctx);
    throw std::runtime_error(what + ": " + why);
  };
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1) {
    fail("TLS versions");
  }
  if (SSL_CTX_set_cipher_list(ctx, tls12_ciphers) != 1) fail("TLS 1.2 ciphers");
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_COMPRESSION);
  // Writes return what one record took (partial writes), from a buffer that may have moved
  // since a write said `again` (the connection's output string grows); idle connections give
  // their record buffers back.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  // Records are read from the socket in as large a read as the buffer takes, not header then
  // body: a request costs one recv, and the read that finds the socket empty one more.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  SSL_CTX_sess_set_cache_size(ctx, session_cache_size);
  SSL_CTX_set_timeout(ctx, session_timeout_s);
  if (SSL_CTX_set_session_id_context(ctx, session_id_context, sizeof session_id_context - 1) != 1) {
    fail("session id context");
  }
  SSL_CTX_set_alpn_select_cb(ctx, select_alpn, nullptr);

  // The certificate, then the chain behind it (as SSL_CTX_use_certificate_chain_file reads).
  const std::string cert_what = "certificate " + pem.cert_name;
  bio = BIO_new_mem_buf(pem.cert.data(), static_cast<int>(pem.cert.size()));
  if (bio == nullptr) fail(cert_what);
  X509* leaf = PEM_read_bio_X509_AUX(bio, nullptr, nullptr, nullptr);
  if (leaf == nullptr) fail(cert_what);
  const int used = SSL_CTX_use_certificate(ctx, leaf);
  X509_free(leaf);
  if (used != 1) fail(cert_what);
  while (X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
      X509_free(ca);
      fail(cert_what);
    }
  }
  const unsigned long end = ERR_peek_last_error();
  if (ERR_GET_LIB(end) != ERR_LIB_PEM || ERR_GET_REASON(end) != PEM_R_NO_START_LINE) {
    fail(cert_what);  // not the end of the file: a broken certificate in the chain
  }
  ERR_clear_error();
  BIO_free(bio);

  const std::string key_what = "private key " + pem.key_name;
  bio = BIO_new_mem_buf(pem.key.data(), static_cast<int>(pem.key.size()));
  if (bio == nullptr) fail(key_what);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  if (key == nullptr) fail(key_what);
  const int key_used = SSL_CTX_use_PrivateKey(ctx, key);
  EVP_PKEY_free(key);
  if (key_used != 1) fail(key_what);
  BIO_free(bio);
  bio = nullptr;
  if (SSL_CTX_check_private_key(ctx) != 1) {
    fail("key " + pem.key_name + " does not match " + pem.cert_name);
  }
  return ctx;
}

// The socket under an SSL: recv and send(MSG_NOSIGNAL) (OpenSSL's own socket BIO writes with
// write(2), which raises SIGPIPE on a reset connection). The BIO's data is the tls_transport
// over it (set by its constructor), told after every recv whether the socket was drained: the
// read() of a transport that got a short recv, and whose SSL holds nothing more, is drained
// without one more SSL_read to find the socket empty (transport.hpp's short-read contract).
int socket_bio_read(BIO* b, char* out, int len) {
  BIO_clear_retry_flags(b);
  auto* t = static_cast<tls_transport*>(BIO_get_data(b));
  if (t == nullptr) return -1;  // no transport over it (yet): no I/O either
  for (;;) {
    const ssize_t n = ::recv(t->fd(), out, static_cast<std::size_t>(len), 0);
    if (n < 0 && errno == EINTR) continue;
    t->note_socket_read(n < len);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
    return -1;
  }
}

int socket_bio_write(BIO* b, const char* in, int len) {
  BIO_clear_retry_flags(b);
  auto* t = static_cast<tls_transport*>(BIO_get_data(b));
  if (t == nullptr) return -1;
  for (;;) {
    const ssize_t n = ::send(t->fd(), in, static_cast<std::size_t>(len), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n >= 0) return static_cast<int>(n);
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
    return -1;
  }
}

long socket_bio_ctrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;  // nothing is buffered here
}

BIO_METHOD* socket_bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "spoold socket");
    if (m != nullptr) {
      BIO_meth_set_read(m, socket_bio_read);
      BIO_meth_set_write(m, socket_bio_write);
      BIO_meth_set_ctrl(m, socket_bio_ctrl);
    }
    return m;
  }();
  return method;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// tls_context

namespace {

// The context whose mutex fork() must not copy while locked (spoold has one).
std::atomic<tls_context*> forking_context{nullptr};

void fork_prepare() {
  if (tls_context* c = forking_context.load()) c->lock_for_fork();
}
void fork_parent() {
  if (tls_context* c = forking_context.load()) c->unlock_after_fork_in_parent();
}
void fork_child() {
  if (tls_context* c = forking_context.load()) c->reset_after_fork_in_child();
}

}  // namespace

// The certificate and key in use, as PEM bytes in shared memory, so that a process forked
// before a reload loads what the reload loaded (the files may have changed again since). One
// writer (the process that reloads, on its signal-taking thread); readers copy under a sequence
// count, odd while the bytes are being written (a seqlock). Bytes are atomics so that a copy
// racing a write is defined; the sequence tells the reader to copy again.
//
// The orderings are read-modify-writes on the sequence, not fences (which ThreadSanitizer does
// not model): the writer makes it odd with an acquire read-modify-write, and the reader checks
// it after its copy with a release one that adds nothing. If the check comes first in the
// sequence's modification order, the writer's increment reads from it, so the copy happens
// before the writes and sees none of them; if it comes later, it reads a newer value than the
// reader's first load, and the reader copies again.
struct tls_context::shared_pem {
  static constexpr std::size_t capacity = 256 * 1024;
  std::atomic<std::uint64_t> sequence{0};
  std::atomic<std::uint32_t> cert_size{0};
  std::atomic<std::uint32_t> key_size{0};
  std::atomic<char> bytes[capacity];
};

namespace {

pem_pair read_pem(const std::string& cert_file, const std::string& key_file) {
  pem_pair pem{read_whole(cert_file, "certificate"), read_whole(key_file, "private key"), cert_file,
               key_file};
  if (pem.cert.size() + pem.key.size() > tls_context::pem_capacity()) {
    throw std::runtime_error("certificate " + cert_file + " and key " + key_file +
                             " together exceed 256 KiB");
  }
  return pem;
}

void copy_in(std::atomic<char>* to, const std::string& from) {
  for (std::size_t i = 0; i < from.size(); ++i) to[i].store(from[i], std::memory_order_relaxed);
}

std::string copy_out(const std::atomic<char>* from, std::size_t n) {
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; ++i) out[i] = from[i].load(std::memory_order_relaxed);
  return out;
}

}  // namespace

std::size_t tls_context::pem_capacity() noexcept { return shared_pem::capacity; }

tls_context::tls_context(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {
  const pem_pair pem = read_pem(cert_file_, key_file_);
  current_ = make_ctx(pem);
  try {
    shared_ = make_shared_mapping<shared_pem>("mmap (TLS certificate)");
  } catch (...) {
    SSL_CTX_free(current_);
    throw;
  }
  publish(pem);
  loaded_sequence_ = shared_->sequence.load(std::memory_order_relaxed);
  static std::once_flag registered;
  std::call_once(registered, [] { ::pthread_atfork(fork_prepare, fork_parent, fork_child); });
  forking_context.store(this);
}

tls_context::~tls_context() {
  tls_context* self = this;
  forking_context.compare_exchange_strong(self, nullptr);
  SSL_CTX_free(current_);
}

void tls_context::publish(const pem_pair& pem) {
  shared_pem& s = *shared_;
  // Odd: being written.
  const std::uint64_t seq = s.sequence.fetch_add(1, std::memory_order_acquire);
  copy_in(s.bytes, pem.cert);
  copy_in(s.bytes + pem.cert.size(), pem.key);
  s.cert_size.store(static_cast<std::uint32_t>(pem.cert.size()), std::memory_order_relaxed);
  s.key_size.store(static_cast<std::uint32_t>(pem.key.size()), std::memory_order_relaxed);
  s.sequence.store(seq + 2, std::memory_order_release);
}

void tls_context::install(SSL_CTX* fresh, std::uint64_t sequence) {
  SSL_CTX* old = nullptr;
  {
    std::lock_guard lock(mu_);
    // Tickets issued under the old keys keep resuming.
    unsigned char keys[80];
    if (SSL_CTX_get_tlsext_ticket_keys(current_, keys, sizeof keys) == 1) {
      (void)SSL_CTX_set_tlsext_ticket_keys(fresh, keys, sizeof keys);
    }
    old = current_;
    current_ = fresh;
    loaded_sequence_ = sequence;
  }
  SSL_CTX_free(old);  // connections that use it hold references of their own
}

std::string tls_context::reload() {
  SSL_CTX* fresh = nullptr;
  pem_pair pem;
  try {
    pem = read_pem(cert_file_, key_file_);
    fresh = make_ctx(pem);
  } catch (const std::exception& e) {
    return e.what();
  }
  std::uint64_t sequence;
  {
    // Under mu_ with the swap: this process's threads never see the sequence ahead of current_.
    std::lock_guard lock(mu_);
    publish(pem);
    sequence = shared_->sequence.load(std::memory_order_relaxed);
  }
  install(fresh, sequence);
  return {};
}

void tls_context::catch_up() {
  shared_pem& s = *shared_;
  pem_pair pem{{}, {}, cert_file_, key_file_};
  std::uint64_t seq;
  for (;;) {
    seq = s.sequence.load(std::memory_order_acquire);
    if (seq % 2 != 0) continue;  // being written: a few microseconds
    const std::size_t cert_size = s.cert_size.load(std::memory_order_relaxed);
    const std::size_t key_size = s.key_size.load(std::memory_order_relaxed);
    if (cert_size + key_size <= shared_pem::capacity) {
      pem.cert = copy_out(s.bytes, cert_size);
      pem.key = copy_out(s.bytes + cert_size, key_size);
    }
    if (s.sequence.fetch_add(0, std::memory_order_release) == seq) break;
  }
  SSL_CTX* fresh = nullptr;
  try {
    fresh = make_ctx(pem);
  } catch (const std::exception& e) {
    // The reloading process loaded these bytes; failing here means memory ran out.
    std::fprintf(stderr,
                 "spoold: TLS reload failed in process %d, keeping the current "
                 "certificate: %s\n",
                 static_cast<int>(::getpid()), e.what());
    std::lock_guard lock(mu_);
    loaded_sequence_ = seq;
    return;
  }
  install(fresh, seq);
}

SSL_CTX* tls_context::current_ctx() {
  std::lock_guard lock(mu_);
  // reload() changes both under mu_: they differ only in a process forked before a reload.
  if (shared_->sequence.load(std::memory_order_acquire) != loaded_sequence_) return nullptr;
  SSL_CTX_up_ref(current_);
  return current_;
}

SSL* tls_context::new_ssl(int fd) {
  SSL_CTX* ctx = current_ctx();
  if (ctx == nullptr) {
    catch_up();  // a process forked before a reload
    ctx = current_ctx();
    if (ctx == nullptr) return nullptr;  // reloaded again meanwhile: this client retries
  }
  SSL* ssl = SSL_new(ctx);
  SSL_CTX_free(ctx);  // the SSL holds its own reference
  if (ssl == nullptr) {
    ERR_clear_error();
    return nullptr;
  }
  (void)fd;  // the transport made over this SSL knows it (socket_bio_read)
  BIO_METHOD* method = socket_bio_method();
  BIO* bio = method != nullptr ? BIO_new(method) : nullptr;
  if (bio == nullptr) {
    ERR_clear_error();
    SSL_free(ssl);
    return nullptr;
  }
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl, bio, bio);  // one reference for both directions
  SSL_set_accept_state(ssl);
  return ssl;
}

// ---------------------------------------------------------------------------------------------
// tls_transport

tls_transport::tls_transport(int fd, SSL* ssl) noexcept
    : transport(fd), ssl_(ssl), established_(SSL_is_init_finished(ssl) == 1) {
  SSL_set_app_data(ssl_, this);
  BIO_set_data(SSL_get_rbio(ssl_), this);
}

io_status tls_transport::handshake() noexcept {
  ERR_clear_error();
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) {
    established_ = true;
    crossed_ = 0;
    return io_status::ok;
  }
  return classify(rc, POLLIN);
}

tls_transport::~tls_transport() { SSL_free(ssl_); }  // the socket is its owner's to close

io_status tls_transport::classify(int rc, short own_direction) noexcept {
  const int err = SSL_get_error(ssl_, rc);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      crossed_ = own_direction == POLLIN ? 0 : POLLIN;
      return io_status::again;
    case SSL_ERROR_WANT_WRITE:
      crossed_ = own_direction == POLLOUT ? 0 : POLLOUT;
      return io_status::again;
    case SSL_ERROR_ZERO_RETURN:  // close_notify, or (SSL_OP_IGNORE_UNEXPECTED_EOF) a bare close
      crossed_ = 0;
      if (!established_ && !failed_) set_failure(tls_failure::closed);
      return io_status::eof;
    case SSL_ERROR_SSL: {
      crossed_ = 0;
      broken_ = true;
      const int reason = ERR_GET_REASON(ERR_peek_error());
      ERR_clear_error();
      if (!established_ && !failed_) {
        set_failure(reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST
                        ? tls_failure::plaintext
                        : tls_failure::protocol);
      }
      return io_status::error;
    }
    default:  // SSL_ERROR_SYSCALL: the socket failed (reset)
      crossed_ = 0;
      broken_ = true;
      ERR_clear_error();
      if (!established_ && !failed_) set_failure(tls_failure::closed);
      return io_status::error;
  }
}

io_result tls_transport::read(char* into, std::size_t size) noexcept {
  // The short-read contract (transport.hpp): SSL_read hands out one record at a time, so read
  // until the buffer is full or the socket has nothing more.
  std::size_t got = 0;
  while (got < size) {
    ERR_clear_error();
    const int ask = static_cast<int>(std::min<std::size_t>(size - got, 1u << 30));
    const int n = SSL_read(ssl_, into + got, ask);
    if (n > 0) {
      established_ = true;
      crossed_ = 0;
      got += static_cast<std::size_t>(n);
      // The socket's last recv came back short and the session holds nothing more: drained,
      // without one more SSL_read that would only find the socket empty.
      if (socket_drained_ && SSL_has_pending(ssl_) == 0) break;
      continue;
    }
    const io_status s = classify(n, POLLIN);
    if (s == io_status::again && SSL_is_init_finished(ssl_)) established_ = true;
    if (got > 0 && s == io_status::again) break;
    if (got > 0) {
      // eof or error after some bytes: hand those out now; the next read says it again.
      break;
    }
    return {s, 0};
  }
  return {io_status::ok, got};
}

io_result tls_transport::write(const char* from, std::size_t size, bool more) noexcept {
  (void)more;  // records are cut by SSL_write; there is no cork to hold them
  ERR_clear_error();
  const int ask = static_cast<int>(std::min<std::size_t>(size, 1u << 30));
  const int n = SSL_write(ssl_, from, ask);
  if (n > 0) {
    crossed_ = 0;
    return {io_status::ok, static_cast<std::size_t>(n)};
  }
  const io_status s = classify(n, POLLOUT);
  return {s == io_status::eof ? io_status::error : s, 0};
}

io_result tls_transport::send_file(int file_fd, std::uint64_t& offset, std::size_t size) noexcept {
  // The buffer holds file bytes from file_at_; `offset` only moves by what SSL_write accepted,
  // so after an `again` the same bytes are offered again, as SSL_write requires.
  if (file_fd != file_fd_ || offset < file_at_ || offset >= file_at_ + file_len_) {
    if (!file_buf_) {
      file_buf_ = std::unique_ptr<char[]>(new (std::nothrow) char[file_buffer_size]);
      if (!file_buf_) return {io_status::error, 0};
    }
    const std::size_t want = std::min(size, file_buffer_size);
    ssize_t n;
    do {
      n = ::pread(file_fd, file_buf_.get(), want, static_cast<off_t>(offset));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return {io_status::error, 0};  // the file shrank under us
    file_fd_ = file_fd;
    file_at_ = offset;
    file_len_ = static_cast<std::size_t>(n);
  }
  const std::size_t skip = static_cast<std::size_t>(offset - file_at_);
  const std::size_t left = std::min(file_len_ - skip, size);
  const io_result r = write(file_buf_.get() + skip, left, false);
  if (r.status == io_status::ok) {
    offset += r.bytes;
    if (offset == file_at_ + file_len_) file_fd_ = -1;  // used up
  }
  return r;
}

bool tls_transport::shutdown_write() noexcept {
  // close_notify, then the socket's sending side. A close_notify the socket cannot take now is
  // dropped with the rest: the peer still sees the end of the stream.
  close_notify();
  return ::shutdown(fd_, SHUT_WR) == 0;
}

void tls_transport::close_notify() noexcept {
  if (notified_ || broken_ || !established_ || ssl_ == nullptr) return;
  notified_ = true;
  ERR_clear_error();
  (void)SSL_shutdown(ssl_);
  ERR_clear_error();
}

}  // namespace spoold
