// open_store: the --store spec ("sqlite:PATH", "redis://HOST[:PORT]") to a store.
#include <charconv>
#include <stdexcept>
#include <string>
#include <string_view>

#include "store/store.hpp"

namespace spoold::store {
namespace {

constexpr std::string_view sqlite_prefix = "sqlite:";
constexpr std::string_view redis_prefix = "redis://";

[[noreturn]] void malformed(std::string_view spec, std::string_view why) {
  throw std::invalid_argument("store spec \"" + std::string(spec) + "\": " + std::string(why) +
                              " (expected sqlite:PATH or redis://HOST[:PORT])");
}

int parse_port(std::string_view spec, std::string_view text) {
  int port = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port < 1 ||
      port > 65535) {
    malformed(spec, "the port must be a number from 1 to 65535");
  }
  return port;
}

redis_options parse_redis(std::string_view spec, std::string_view rest) {
  redis_options options;
  if (rest.find_first_of("/?#@") != std::string_view::npos) {
    malformed(spec, "only a host and a port are supported after redis://");
  }
  std::string_view host = rest;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {  // an IPv6 literal: [::1]:6379
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) malformed(spec, "unterminated [ in the host");
    host = rest.substr(1, close - 1);
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') malformed(spec, "expected :PORT after ]");
      port = after.substr(1);
      if (port.empty()) malformed(spec, "empty port");
    }
  } else if (const std::size_t colon = rest.find(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) malformed(spec, "empty port");
  }
  if (host.empty()) malformed(spec, "no host");
  options.host = std::string(host);
  if (!port.empty()) options.port = parse_port(spec, port);
  return options;
}

}  // namespace

std::unique_ptr<store> open_store(std::string_view spec) {
  if (spec.starts_with(sqlite_prefix)) {
    const std::string_view path = spec.substr(sqlite_prefix.size());
    if (path.empty()) malformed(spec, "no file name after sqlite:");
    // Each thread has its own connection, and every connection to ":memory:" is a separate
    // database: the guestbook would differ from one request to the next.
    if (path == ":memory:") malformed(spec, "an in-memory SQLite database cannot be shared");
    return open_sqlite_store(std::string(path));
  }
  if (spec.starts_with(redis_prefix)) {
    return open_redis_store(parse_redis(spec, spec.substr(redis_prefix.size())));
  }
  malformed(spec, "unknown kind of store");
}

}  // namespace spoold::store
