// Refusing a connection: the 503 past --max-connections (or when nothing can take a
// connection), the 429 past --max-connections-per-client, how each is counted, and where the
// refused socket goes (refusals.hpp). Every model refuses through refuse_connection().
#pragma once

#include <string_view>

#include "conn/accepted.hpp"
#include "server_context.hpp"

namespace spoold {

// Why a connection is refused.
enum class refusal_reason {
  overloaded,  // past --max-connections, or nothing could take it: 503
  per_client,  // past --max-connections-per-client: 429
};

// The answers to a refused connection.
inline constexpr std::string_view refused_response =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 33\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    "Too many connections; try again.\n";
inline constexpr std::string_view refused_per_client_response =
    "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 40\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    "Too many connections from your address.\n";

[[nodiscard]] constexpr std::string_view refusal_response(refusal_reason why) noexcept {
  return why == refusal_reason::per_client ? refused_per_client_response : refused_response;
}

// Counts a refusal and its answer in ctx.counters.
void count_refusal(server_context& ctx, refusal_reason why) noexcept;

// Answers the 503 of --max-connections (or of a connection nothing could take), or the 429 of
// --max-connections-per-client, and counts the refusal. A refused connection is no part of its
// client's count: its slot is given back first. The socket goes to ctx.refused, which lingers on it
// until the client has read the answer and closed (refusals.hpp); when that cannot take it, the
// answer gets one try and the socket is closed at once (a client that cannot take 150 bytes now
// does not get them, and request bytes still unread make the close a reset).
void refuse_connection(server_context& ctx, accepted&& a,
                       refusal_reason why = refusal_reason::overloaded) noexcept;

}  // namespace spoold
