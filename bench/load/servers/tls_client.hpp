// tls_client.hpp: new TLS connections per second against a server on 127.0.0.1, for http --tls.
// wrk makes a full handshake for each new connection and never offers a session back, so this
// client measures both kinds: full handshakes, and resumed ones (each client offers the session
// its previous connection got: a TLS 1.3 ticket, or a TLS 1.2 ticket or session ID).
#pragma once

#include <cstdint>
#include <string>

namespace bench {

struct handshake_load {
  std::uint16_t port = 0;
  std::string path = "/";  // one GET per connection, with Connection: close
  unsigned clients = 2;    // threads, each with one connection at a time (blocking)
  unsigned seconds = 3;
  bool resume = false;  // offer the previous connection's session
  bool tls12 = false;   // TLS 1.2 only (else what both sides prefer: 1.3)
};

struct handshake_result {
  double per_s = 0;  // connections that completed a 200 answer, per second
  std::uint64_t completed = 0;
  std::uint64_t resumed = 0;  // of those, the server resumed the session
  std::uint64_t failed = 0;   // connect, handshake or answer failures
  double client_cpu_s = 0;    // this process's CPU during the run
};

// Runs the load; throws std::runtime_error if OpenSSL cannot be set up.
handshake_result run_handshakes(const handshake_load& load);

}  // namespace bench
