// The access log: one Common Log Format line per response,
//   203.0.113.7 - - [10/Oct/2000:13:55:36 -0700] "GET /x HTTP/1.1" 200 2326
// appended to a file or written to stdout.
//
// Lines collect in one buffer and reach the file in large writes: when the buffer passes
// flush_threshold, on flush() (the server calls it on its timer tick, so an idle server's log
// is at most one tick behind) and in the destructor, so no line is lost at an orderly shutdown.
// Lines are never interleaved or split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>

namespace spoold {

class access_log {
 public:
  static constexpr std::size_t flush_threshold = 64 * 1024;

  // `target` is a file path (created 0644 if missing, appended to) or "-" for stdout. Throws
  // std::system_error naming the path if the file cannot be opened.
  static std::unique_ptr<access_log> open(const std::string& target);

  ~access_log();  // flushes
  access_log(const access_log&) = delete;
  access_log& operator=(const access_log&) = delete;

  // `request_line` as sent ("GET /x HTTP/1.1"); quotes, backslashes and control bytes in it
  // are escaped (\" \\ \xHH) so a client cannot forge a line. `bytes` is the body length sent;
  // 0 is written "-" as the format asks.
  void record(std::string_view peer_ip, std::string_view request_line, int status,
              std::uint64_t bytes);

  // Writes what is buffered. A failed write drops those lines (there is nowhere else to put
  // them) and is remembered: last_error() says why.
  void flush();
  [[nodiscard]] std::error_code last_error() const;

 private:
  access_log(int fd, bool owns_fd);
  void write_locked();

  int fd_;
  bool owns_fd_;
  mutable std::mutex mu_;
  std::string buffer_;          // guarded by mu_
  std::error_code last_error_;  // guarded by mu_
};

// The line record() writes, without the trailing newline; `unix_seconds` is shown in local time
// with its UTC offset. Exposed for tests.
std::string format_access_line(std::string_view peer_ip, std::string_view request_line, int status,
                               std::uint64_t bytes, std::int64_t unix_seconds);

}  // namespace spoold
