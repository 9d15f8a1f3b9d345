#include "servers/http_probe.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace bench {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

// The whole response: sends the request, reads until the server closes (or 10 s pass).
std::string exchange(std::uint16_t port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(std::string("socket: ") + std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { close(fd); }
  } guard{fd};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    fail("connect to port " + std::to_string(port) + ": " + std::strerror(errno));
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::string("send: ") + std::strerror(errno));
    sent += static_cast<std::size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string response;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) fail("no end of the response within 10 s (Connection: close ignored?)");
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail(std::string("poll: ") + std::strerror(errno));
    if (ready == 0) continue;
    char buf[16384];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::string("recv: ") + std::strerror(errno));
    if (n == 0) return response;
    response.append(buf, static_cast<std::size_t>(n));
  }
}

// The body of a 200 answer to GET `path`; throws saying what was wrong otherwise.
std::string get_ok_body(std::uint16_t port, const std::string& path) {
  const std::string response =
      exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  const auto head_end = response.find("\r\n\r\n");
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (status_line.rfind("HTTP/1.1 200", 0) != 0 && status_line.rfind("HTTP/1.0 200", 0) != 0)
    fail("GET " + path + " answered '" + status_line + "', not 200");
  if (head_end == std::string::npos) fail("GET " + path + ": the response head never ended");
  return response.substr(head_end + 4);
}

}  // namespace

void expect_file_served(std::uint16_t port, const std::string& path,
                        const std::string& expected_body) {
  const std::string body = get_ok_body(port, path);
  if (body != expected_body)
    fail("GET " + path + " returned " + std::to_string(body.size()) +
         " body bytes that differ from the file's " + std::to_string(expected_body.size()) +
         " (chunked, or not the file)");
}

void expect_page_served(std::uint16_t port, const std::string& path, const std::string& marker) {
  const std::string body = get_ok_body(port, path);
  if (body.find(marker) == std::string::npos)
    fail("GET " + path + " returned a page without '" + marker + "'");
}

}  // namespace bench
