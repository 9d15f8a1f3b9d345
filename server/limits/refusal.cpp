#include "limits/refusal.hpp"

#include <unistd.h>

#include "conn/transport.hpp"
#include "limits/refusals.hpp"

namespace spoold {

void count_refusal(server_context& ctx, refusal_reason why) noexcept {
  if (why == refusal_reason::per_client) {
    ctx.counters.connection_refused_per_client();
    ctx.counters.record_response(429, refused_per_client_response.size());
  } else {
    ctx.counters.connection_refused();
    ctx.counters.record_response(503, refused_response.size());
  }
}

void refuse_connection(server_context& ctx, accepted&& a, refusal_reason why) noexcept {
  a.slot.release();
  if (a.fd < 0) return;
  if (a.tls != nullptr) {
    // A TLS client could not read a plaintext answer; it sees the connection close.
    SSL_free(a.ssl);
    a.ssl = nullptr;
    ::close(a.fd);
    a.fd = -1;
    count_refusal(ctx, why);
    return;
  }
  if (ctx.refused != nullptr && ctx.refused->take(std::move(a), why)) return;
  // take() left the socket to `a` when it returned false.
  socket_transport socket(a.fd);  // NOLINT(bugprone-use-after-move): closes it
  a.fd = -1;
  const std::string_view answer = refusal_response(why);
  (void)socket.write(answer.data(), answer.size(), false);
  count_refusal(ctx, why);
}

}  // namespace spoold
