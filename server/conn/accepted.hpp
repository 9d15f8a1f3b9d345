// A connection as accept() hands it over: the socket, the client's address, its place in its
// client's count, and, for a TLS listener, what the connection layers on the socket.
#pragma once

#include <openssl/ssl.h>

#include "limits/client_limits.hpp"
#include "net.hpp"

namespace spoold {

class tls_context;

// A socket accept() returned: non-blocking and close-on-exec, owned by whoever holds this.
// Moving it moves the client's count (the slot) and copies the descriptor's number.
struct accepted {
  int fd = -1;
  peer_address peer;
  client_slot slot;  // the connection's place in its client's count, if counted
  // Accepted on a TLS listener: the connection layers a tls_transport on the socket, and a
  // refusal closes it without a plaintext answer the client could not read.
  tls_context* tls = nullptr;
  // A TLS session whose handshake has ended (the queue model's handshake stage), owned by
  // whoever holds this: the connection layers it on the socket; a refusal frees it.
  SSL* ssl = nullptr;
};

}  // namespace spoold
