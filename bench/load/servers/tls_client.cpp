#include "servers/tls_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace bench {
namespace {

constexpr unsigned char alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct tally {
  std::uint64_t completed = 0;
  std::uint64_t resumed = 0;
  std::uint64_t failed = 0;
};

// One connection: connect, handshake (offering `session`), GET, read to the end, close_notify.
// Returns the connection's session for the next one (nullptr when not resuming or failed).
SSL_SESSION* one_connection(SSL_CTX* ctx, const handshake_load& load, const std::string& request,
                            SSL_SESSION* session, tally& t) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ++t.failed;
    return nullptr;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(load.port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  SSL* ssl = nullptr;
  SSL_SESSION* next = nullptr;
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      (ssl = SSL_new(ctx)) != nullptr && SSL_set_fd(ssl, fd) == 1) {
    if (session != nullptr) SSL_set_session(ssl, session);
    if (SSL_connect(ssl) == 1 &&
        SSL_write(ssl, request.data(), static_cast<int>(request.size())) > 0) {
      char buf[16384];
      std::size_t got = 0;
      bool status_ok = false;
      for (;;) {
        const int n = SSL_read(ssl, buf, sizeof buf);
        if (n <= 0) break;
        if (got == 0) status_ok = n >= 12 && std::memcmp(buf, "HTTP/1.1 200", 12) == 0;
        got += static_cast<std::size_t>(n);
      }
      ok = status_ok;
      if (ok) {
        if (SSL_session_reused(ssl) == 1) ++t.resumed;
        if (load.resume) next = SSL_get1_session(ssl);
        SSL_shutdown(ssl);  // a clean end keeps the session resumable
      }
    }
  }
  ERR_clear_error();
  if (ssl != nullptr) SSL_free(ssl);
  ::close(fd);
  if (ok) {
    ++t.completed;
  } else {
    ++t.failed;
  }
  return next;
}

}  // namespace

handshake_result run_handshakes(const handshake_load& load) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) throw std::runtime_error("SSL_CTX_new failed");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (load.tls12) SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);  // speed only; the tests verify
  SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof alpn_http11);
  // Sessions are kept by hand (SSL_get1_session), one per client thread.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);

  const std::string request =
      "GET " + load.path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  std::atomic<bool> stop{false};
  std::vector<tally> tallies(load.clients);
  std::vector<std::thread> threads;
  const double cpu_before = process_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < load.clients; ++i) {
    threads.emplace_back([&, i] {
      SSL_SESSION* session = nullptr;
      while (!stop.load(std::memory_order_relaxed)) {
        SSL_SESSION* next = one_connection(ctx, load, request, session, tallies[i]);
        if (next != nullptr || !load.resume) {
          SSL_SESSION_free(session);
          session = next;
        }
      }
      SSL_SESSION_free(session);
    });
  }
  // The measured interval: a timed run, nothing waits on a result here.
  std::this_thread::sleep_for(std::chrono::seconds(load.seconds));
  stop.store(true);
  for (std::thread& t : threads) t.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  SSL_CTX_free(ctx);

  handshake_result r;
  for (const tally& t : tallies) {
    r.completed += t.completed;
    r.resumed += t.resumed;
    r.failed += t.failed;
  }
  r.per_s = static_cast<double>(r.completed) / elapsed;
  r.client_cpu_s = process_cpu_seconds() - cpu_before;
  return r;
}

}  // namespace bench
