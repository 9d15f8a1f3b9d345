#include "net.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace spoold {
namespace {

[[noreturn]] void fail(int fd, const std::string& what) {
  int err = errno;
  if (fd >= 0) ::close(fd);
  throw std::system_error(err, std::generic_category(), what);
}

// A socket address of either family, with the length bind() wants.
struct socket_address {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// Parses a --bind address (see is_bind_address) into `out`, with `port`. IPv4 addresses take no
// brackets: in a URL only IPv6 ones have them.
bool parse_bind(std::string_view text, std::uint16_t port, socket_address& out) {
  const bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
  if (bracketed) text = text.substr(1, text.size() - 2);
  char address[INET6_ADDRSTRLEN] = {};
  if (text.empty() || text.size() >= sizeof address) return false;
  std::memcpy(address, text.data(), text.size());
  out = {};
  auto& in = reinterpret_cast<sockaddr_in&>(out.storage);
  if (!bracketed && ::inet_pton(AF_INET, address, &in.sin_addr) == 1) {
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    out.length = sizeof in;
    return true;
  }
  auto& in6 = reinterpret_cast<sockaddr_in6&>(out.storage);
  if (::inet_pton(AF_INET6, address, &in6.sin6_addr) == 1) {
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    out.length = sizeof in6;
    return true;
  }
  return false;
}

// An IPv4 or IPv6 address as text, a v4-mapped one as the IPv4 address it maps; empty for
// another family.
std::string address_text(const sockaddr_storage& storage) {
  char text[INET6_ADDRSTRLEN] = {};
  const char* printed = nullptr;
  if (storage.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(storage);
    printed = ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
  } else if (storage.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(storage);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      printed = ::inet_ntop(AF_INET, &in6.sin6_addr.s6_addr[12], text, sizeof text);
    } else {
      printed = ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    }
  }
  return printed != nullptr ? printed : "";
}

}  // namespace

std::string peer_address::text() const {
  std::string text = address_text(storage);
  return text.empty() ? "-" : text;
}

namespace {

// Byte i of the mask of a prefix `bits` long.
std::uint8_t prefix_mask(unsigned bits, unsigned i) noexcept {
  const unsigned left = bits > i * 8 ? bits - i * 8 : 0;
  return static_cast<std::uint8_t>(left >= 8 ? 0xff : (0xff << (8 - left)) & 0xff);
}

}  // namespace

bool ip_address::is_v4() const noexcept {
  static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(bytes.data(), mapped, sizeof mapped) == 0;
}

std::string ip_address::text() const {
  sockaddr_storage storage{};
  auto& in6 = reinterpret_cast<sockaddr_in6&>(storage);
  in6.sin6_family = AF_INET6;
  std::memcpy(&in6.sin6_addr, bytes.data(), bytes.size());
  return address_text(storage);
}

std::optional<ip_address> parse_ip_address(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  char buf[INET6_ADDRSTRLEN];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  ip_address a;
  if (::inet_pton(AF_INET, buf, a.bytes.data() + 12) == 1) {
    a.bytes[10] = a.bytes[11] = 0xff;
    return a;
  }
  if (::inet_pton(AF_INET6, buf, a.bytes.data()) == 1) return a;
  return std::nullopt;
}

bool ip_range::contains(const ip_address& a) const noexcept {
  for (unsigned i = 0; i < 16; ++i) {
    if ((a.bytes[i] & prefix_mask(bits, i)) != base.bytes[i]) return false;
  }
  return true;
}

std::optional<ip_range> parse_ip_range(std::string_view text) {
  const auto slash = text.find('/');
  const auto base = parse_ip_address(text.substr(0, slash));
  if (!base) return std::nullopt;
  // The prefix counts in the family as written: "::ffff:10.0.0.0/104" is IPv6's.
  const unsigned width = text.substr(0, slash).find(':') == std::string_view::npos ? 32 : 128;
  unsigned prefix = width;
  if (slash != std::string_view::npos) {
    const auto digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    prefix = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      prefix = prefix * 10 + static_cast<unsigned>(c - '0');
    }
    if (prefix > width) return std::nullopt;
  }
  ip_range r{*base, prefix + (128 - width)};
  // Bits past the prefix are cleared, so that contains() compares masked bytes with it.
  for (unsigned i = 0; i < 16; ++i) r.base.bytes[i] &= prefix_mask(r.bits, i);
  return r;
}

std::optional<ip_address> peer_address::ip() const noexcept {
  ip_address a;
  if (storage.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(storage);
    a.bytes[10] = a.bytes[11] = 0xff;
    std::memcpy(a.bytes.data() + 12, &v4.sin_addr, 4);
    return a;
  }
  if (storage.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(storage);
    std::memcpy(a.bytes.data(), &v6.sin6_addr, 16);
    return a;
  }
  return std::nullopt;
}

bool is_bind_address(std::string_view text) {
  socket_address addr;
  return parse_bind(text, 0, addr);
}

std::string url_host(std::string_view bind) {
  socket_address addr;
  if (!parse_bind(bind, 0, addr)) return std::string(bind);
  std::string host = address_text(addr.storage);
  return host.find(':') == std::string::npos ? host : "[" + host + "]";
}

int listen_tcp(const std::string& bind, std::uint16_t port, bool reuse_port) {
  const std::string where = url_host(bind) + ":" + std::to_string(port);
  socket_address addr;
  if (!parse_bind(bind, port, addr)) {
    throw std::system_error(EINVAL, std::generic_category(),
                            "not an IPv4 or IPv6 address: " + bind);
  }
  int fd = ::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(-1, "socket");
  int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) fail(fd, "SO_REUSEADDR");
  if (reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    fail(fd, "SO_REUSEPORT");
  }
  // Set, not left to net.ipv6.bindv6only: "::" is dual-stack on every machine.
  int zero = 0;
  if (addr.storage.ss_family == AF_INET6 &&
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) != 0) {
    fail(fd, "IPV6_V6ONLY");
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0) {
    fail(fd, "bind " + where);
  }
  if (::listen(fd, 65535) != 0) fail(fd, "listen " + where);
  return fd;
}

std::uint16_t local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::system_error(errno, std::generic_category(), "getsockname");
  }
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return 0;
}

std::uint64_t raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur;
}

}  // namespace spoold
