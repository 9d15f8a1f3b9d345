// tls_transport (server/conn/tls.hpp) over a socketpair, against an OpenSSL client on the other
// end, both non-blocking and pumped in turn on one thread: the handshake inside read(), reads
// and writes, send_file resuming after `again` with the same bytes, close_notify, and the
// handshake failures the server counts (plaintext, closed).
#include <fcntl.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "conn/tls.hpp"

namespace spoold {
namespace {

// A self-signed ECDSA P-256 certificate and key, written as PEM files in a temporary directory.
class test_certificate {
 public:
  test_certificate() {
    char tmpl[] = "/tmp/spoold-tls-test-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509_sign(cert, key, EVP_sha256());
    cert_ = dir_ + "/cert.pem";
    key_ = dir_ + "/key.pem";
    std::FILE* f = std::fopen(cert_.c_str(), "w");
    PEM_write_X509(f, cert);
    std::fclose(f);
    f = std::fopen(key_.c_str(), "w");
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  ~test_certificate() {
    std::remove(cert_.c_str());
    std::remove(key_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& cert() const { return cert_; }
  const std::string& key() const { return key_; }

 private:
  std::string dir_, cert_, key_;
};

void non_blocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// A server tls_transport on one end of a socketpair, an OpenSSL client on the other.
class TlsTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    non_blocking(fds_[0]);
    non_blocking(fds_[1]);
    SSL* ssl = ctx_.new_ssl(fds_[0]);
    ASSERT_NE(ssl, nullptr);
    server_ = std::make_unique<tls_transport>(fds_[0], ssl);
    client_ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(client_ctx_, SSL_VERIFY_NONE, nullptr);
    const unsigned char alpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_CTX_set_alpn_protos(client_ctx_, alpn, sizeof alpn);
    client_ = SSL_new(client_ctx_);
    SSL_set_fd(client_, fds_[1]);
    SSL_set_connect_state(client_);
  }

  void TearDown() override {
    server_.reset();
    SSL_free(client_);
    SSL_CTX_free(client_ctx_);
    ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }

  // Pumps both sides until the handshake has ended on both (a bounded number of turns: each
  // turn either side moves on, or the handshake is stuck, which fails the test).
  void handshake() {
    char buf[64];
    for (int turn = 0; turn < 100; ++turn) {
      const int rc = SSL_do_handshake(client_);
      const io_result r = server_->read(buf, sizeof buf);
      ASSERT_NE(r.status, io_status::error);
      ASSERT_NE(r.status, io_status::eof);
      ASSERT_EQ(r.bytes, 0u);
      if (rc == 1 && server_->established()) return;
    }
    FAIL() << "the handshake did not end";
  }

  // Everything the client can read now (non-blocking), appended to `into`; false at close_notify.
  bool client_read(std::string& into) {
    char buf[16384];
    for (;;) {
      const int n = SSL_read(client_, buf, sizeof buf);
      if (n > 0) {
        into.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      return SSL_get_error(client_, n) != SSL_ERROR_ZERO_RETURN;
    }
  }

  test_certificate cert_;
  tls_context ctx_{cert_.cert(), cert_.key()};
  int fds_[2] = {-1, -1};
  std::unique_ptr<tls_transport> server_;
  SSL_CTX* client_ctx_ = nullptr;
  SSL* client_ = nullptr;
};

TEST_F(TlsTransportTest, HandshakeThenBothDirections) {
  handshake();
  EXPECT_FALSE(server_->resumed());
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(SSL_write(client_, request.data(), static_cast<int>(request.size())),
            static_cast<int>(request.size()));
  char buf[4096];
  const io_result r = server_->read(buf, sizeof buf);
  ASSERT_EQ(r.status, io_status::ok);
  EXPECT_EQ(std::string(buf, r.bytes), request);  // a short read: everything there was
  EXPECT_EQ(server_->read(buf, sizeof buf).status, io_status::again);

  const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  const io_result w = server_->write(answer.data(), answer.size(), false);
  ASSERT_EQ(w.status, io_status::ok);
  EXPECT_EQ(w.bytes, answer.size());
  std::string got;
  EXPECT_TRUE(client_read(got));
  EXPECT_EQ(got, answer);
}

TEST_F(TlsTransportTest, ReadFillsTheBufferAcrossRecords) {
  handshake();
  // Three records; a read with room for all of them returns all of them at once.
  for (const char* part : {"first ", "second ", "third"}) {
    ASSERT_GT(SSL_write(client_, part, static_cast<int>(std::strlen(part))), 0);
  }
  char buf[4096];
  const io_result r = server_->read(buf, sizeof buf);
  ASSERT_EQ(r.status, io_status::ok);
  EXPECT_EQ(std::string(buf, r.bytes), "first second third");
  // A buffer smaller than what is there is filled completely (not short).
  ASSERT_GT(SSL_write(client_, "0123456789", 10), 0);
  const io_result small = server_->read(buf, 4);
  ASSERT_EQ(small.status, io_status::ok);
  EXPECT_EQ(small.bytes, 4u);
  const io_result rest = server_->read(buf, sizeof buf);
  ASSERT_EQ(rest.status, io_status::ok);
  EXPECT_EQ(std::string(buf, rest.bytes), "456789");
}

TEST_F(TlsTransportTest, SendFileResumesWithTheSameBytesAfterAgain) {
  handshake();
  // A file far larger than the socket pair's buffers: send_file says `again` many times.
  std::string content(3 * 1024 * 1024 + 123, '\0');
  std::uint32_t x = 12345;
  for (char& c : content) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  char path[] = "/tmp/spoold-tls-file-XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  ::unlink(path);
  ASSERT_EQ(::write(file, content.data(), content.size()), static_cast<ssize_t>(content.size()));

  std::uint64_t offset = 0;
  std::string got;
  int agains = 0;
  for (int turn = 0; offset < content.size() && turn < 100000; ++turn) {
    const std::size_t left = content.size() - static_cast<std::size_t>(offset);
    const io_result r = server_->send_file(file, offset, std::min<std::size_t>(left, 1 << 20));
    ASSERT_NE(r.status, io_status::error);
    if (r.status == io_status::again) {
      ++agains;
      EXPECT_EQ(server_->crossed(), 0);  // a write waits for writable, its own direction
      ASSERT_TRUE(client_read(got));
    }
  }
  ASSERT_EQ(offset, content.size());
  ASSERT_TRUE(client_read(got));
  ::close(file);
  EXPECT_GT(agains, 0);
  ASSERT_EQ(got.size(), content.size());
  EXPECT_TRUE(got == content);
}

TEST_F(TlsTransportTest, ShutdownWriteSendsCloseNotify) {
  handshake();
  ASSERT_TRUE(server_->shutdown_write());
  std::string got;
  EXPECT_FALSE(client_read(got));  // SSL_ERROR_ZERO_RETURN: close_notify arrived
  EXPECT_TRUE(got.empty());
}

TEST_F(TlsTransportTest, PlainHttpFailsAsPlaintext) {
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(fds_[1], request.data(), request.size()), static_cast<ssize_t>(request.size()));
  char buf[256];
  const io_result r = server_->read(buf, sizeof buf);
  EXPECT_EQ(r.status, io_status::error);
  EXPECT_FALSE(server_->established());
  ASSERT_TRUE(server_->failed());
  EXPECT_EQ(server_->failure(), tls_failure::plaintext);
}

TEST_F(TlsTransportTest, ClientGoneDuringHandshakeFailsAsClosed) {
  ASSERT_EQ(SSL_do_handshake(client_), -1);  // the ClientHello is on its way
  ::close(fds_[1]);
  fds_[1] = -1;
  char buf[256];
  io_result r = server_->read(buf, sizeof buf);
  // The ClientHello is answered, then the peer's end shows.
  for (int turn = 0; turn < 10 && r.status == io_status::again; ++turn) {
    r = server_->read(buf, sizeof buf);
  }
  EXPECT_TRUE(r.status == io_status::eof || r.status == io_status::error);
  ASSERT_TRUE(server_->failed());
  EXPECT_EQ(server_->failure(), tls_failure::closed);
}

TEST(TlsContextTest, MissingFilesAreNamed) {
  try {
    tls_context ctx("/nonexistent/cert.pem", "/nonexistent/key.pem");
    FAIL() << "loaded a certificate that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cert.pem"), std::string::npos) << e.what();
  }
}

TEST(TlsContextTest, ReloadOfABadFileKeepsTheCurrentOne) {
  test_certificate cert;
  tls_context ctx(cert.cert(), cert.key());
  EXPECT_EQ(ctx.reload(), "");
  {
    std::FILE* f = std::fopen(cert.cert().c_str(), "w");
    std::fputs("not a certificate\n", f);
    std::fclose(f);
  }
  const std::string failed = ctx.reload();
  EXPECT_NE(failed.find(cert.cert()), std::string::npos) << failed;
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  SSL* ssl = ctx.new_ssl(fds[0]);  // still made, from the certificate loaded before
  EXPECT_NE(ssl, nullptr);
  SSL_free(ssl);
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace spoold
