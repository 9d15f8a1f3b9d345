// The Redis half of the --store spec: "redis://HOST[:PORT]" and
// "redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER". Apart from open_store.cpp so that
// programs that reach Redis without the guestbook (spool-queue) parse the same URLs.
#include <charconv>
#include <stdexcept>
#include <string>
#include <string_view>

#include "store/store.hpp"

namespace spoold::store {
namespace {

constexpr std::string_view redis_prefix = "redis://";
constexpr std::string_view sentinel_prefix = "redis-sentinel://";
constexpr int redis_default_port = 6379;
constexpr int sentinel_default_port = 26379;

int parse_port(std::string_view spec, std::string_view text) {
  int port = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port < 1 ||
      port > 65535) {
    malformed_store_spec(spec, "the port must be a number from 1 to 65535");
  }
  return port;
}

// "host", "host:port", "[v6]" or "[v6]:port".
redis_endpoint parse_endpoint(std::string_view spec, std::string_view text, int default_port) {
  if (text.find_first_of("/?#@,") != std::string_view::npos) {
    malformed_store_spec(spec, "only a host and a port are supported in an address");
  }
  std::string_view host = text;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {  // an IPv6 literal: [::1]:6379
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) malformed_store_spec(spec, "unterminated [ in the host");
    host = text.substr(1, close - 1);
    const std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') malformed_store_spec(spec, "expected :PORT after ]");
      port = after.substr(1);
      if (port.empty()) malformed_store_spec(spec, "empty port");
    }
  } else if (const std::size_t colon = text.find(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) malformed_store_spec(spec, "empty port");
  }
  if (host.empty()) malformed_store_spec(spec, "no host");
  return redis_endpoint{std::string(host), port.empty() ? default_port : parse_port(spec, port)};
}

bool is_master_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// "HOST[:PORT][,HOST[:PORT]...]/MASTER"
void parse_sentinels(std::string_view spec, std::string_view rest, redis_options& options) {
  const std::size_t slash = rest.rfind('/');
  if (slash == std::string_view::npos) malformed_store_spec(spec, "no /MASTER after the Sentinels");
  const std::string_view master = rest.substr(slash + 1);
  if (master.empty()) malformed_store_spec(spec, "empty master name after /");
  for (char c : master) {
    if (!is_master_name_char(c)) {
      malformed_store_spec(spec, "the master name may only have letters, digits, '-', '_' and '.'");
    }
  }
  std::string_view list = rest.substr(0, slash);
  while (true) {
    const std::size_t comma = list.find(',');
    const std::string_view one = list.substr(0, comma);
    if (one.empty()) malformed_store_spec(spec, "an empty Sentinel address");
    options.sentinels.push_back(parse_endpoint(spec, one, sentinel_default_port));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  options.master_name = std::string(master);
}

}  // namespace

void malformed_store_spec(std::string_view spec, std::string_view why) {
  throw std::invalid_argument("store spec \"" + std::string(spec) + "\": " + std::string(why) +
                              " (expected sqlite:PATH, redis://HOST[:PORT] or "
                              "redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER)");
}

bool is_redis_spec(std::string_view spec) noexcept {
  return spec.starts_with(redis_prefix) || spec.starts_with(sentinel_prefix);
}

redis_options parse_redis_spec(std::string_view spec) {
  redis_options options;
  if (spec.starts_with(redis_prefix)) {
    const redis_endpoint at =
        parse_endpoint(spec, spec.substr(redis_prefix.size()), redis_default_port);
    options.host = at.host;
    options.port = at.port;
    return options;
  }
  if (spec.starts_with(sentinel_prefix)) {
    parse_sentinels(spec, spec.substr(sentinel_prefix.size()), options);
    return options;
  }
  malformed_store_spec(spec, "unknown kind of store");
}

std::string redis_endpoint::text() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace spoold::store
