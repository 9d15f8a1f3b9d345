// The access log: one Common Log Format line per response,
//   203.0.113.7 - - [10/Oct/2000:13:55:36 -0700] "GET /x HTTP/1.1" 200 2326
// appended to a file or written to stdout.
//
// Lines collect in one buffer and reach the file in large writes: when the buffer passes
// flush_threshold, on flush() (the server calls it 100 ms after a line starts waiting, so a
// line reaches the file at most that late, and an idle server does not wake to flush nothing)
// and in the destructor, so no line is lost at an orderly shutdown. Lines are never
// interleaved or split.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
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
  // Whether lines wait in the buffer (a snapshot, for an event loop deciding when to flush:
  // it reads this after its own record() calls, on the same thread).
  [[nodiscard]] bool pending() const noexcept { return pending_.load(std::memory_order_relaxed); }
  // Blocks until a line waits in the buffer (true) or `stop` is requested (false): a flusher
  // thread sleeps here while the server is idle instead of waking on a period.
  bool wait_for_lines(std::stop_token stop);
  [[nodiscard]] std::error_code last_error() const;

 private:
  access_log(int fd, bool owns_fd);
  void write_locked();

  int fd_;
  bool owns_fd_;
  mutable std::mutex mu_;
  std::condition_variable_any lines_;  // the buffer stopped being empty
  std::string buffer_;                 // guarded by mu_
  std::atomic<bool> pending_{false};   // !buffer_.empty(), readable without mu_
  std::error_code last_error_;         // guarded by mu_
};

// The line record() writes, without the trailing newline; `unix_seconds` is shown in local time
// with its UTC offset. Exposed for tests.
std::string format_access_line(std::string_view peer_ip, std::string_view request_line, int status,
                               std::uint64_t bytes, std::int64_t unix_seconds);

}  // namespace spoold
