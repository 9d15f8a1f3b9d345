// A response before it is written: status, extra headers, and a body that is either in memory,
// shared with a cache, or a range of an open file (sent with sendfile).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace spoold::http {

std::string_view reason_phrase(int status) noexcept;  // "Not Found"; "Unknown" if unknown

struct response {
  int status = 200;
  std::string headers;  // extra header lines, each "Name: value\r\n" (not Content-Length)
  std::string body;     // used when neither shared_body nor a file is set
  std::shared_ptr<const std::string> shared_body;  // e.g. a cached small file
  int file_fd = -1;  // a file body: the response owns the descriptor (closed on destruction)
  std::uint64_t file_offset = 0;
  std::uint64_t file_length = 0;
  bool head_only = false;  // answer to HEAD: Content-Length as for GET, no body bytes
  bool close = false;      // close the connection after this response

  response() = default;
  response(response&&) noexcept;
  response& operator=(response&&) noexcept;
  response(const response&) = delete;
  response& operator=(const response&) = delete;
  ~response();

  // Appends "name: value\r\n"; control characters other than HTAB (CR and LF above all, which
  // would split the response) are replaced by spaces.
  void add_header(std::string_view name, std::string_view value);
  [[nodiscard]] std::uint64_t body_length() const noexcept;     // whichever body is set
  [[nodiscard]] std::string_view memory_body() const noexcept;  // shared_body or body
};

// A complete response with a small HTML body: "<h1>404 Not Found</h1><p>detail</p>" (detail is
// HTML-escaped and its paragraph left out when empty), Content-Type text/html; charset=utf-8.
// `close` is left false: whether the connection can go on is the caller's decision.
response error_response(int status, std::string_view detail);

// Appends the status line and headers (Server, Date, Content-Length, Connection, then
// r.headers) and the blank line to `out`. keep_alive false adds "Connection: close"; for an
// HTTP/1.0 client that asked for keep-alive it adds "Connection: keep-alive"; r.close acts as
// keep_alive false. Content-Length is body_length() (for head_only too) and is left out for
// 1xx, 204 and 304. A 1xx head is only the status line, r.headers and the blank line. The
// status line always says HTTP/1.1. Date is formatted at most once a second per thread.
void write_head(std::string& out, const response& r, int version_minor, bool keep_alive);

// RFC 7231 IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), and its parser (false if malformed).
// The parser also reads the obsolete forms "Sunday, 06-Nov-94 08:49:37 GMT" (two-digit years
// below 70 are 20xx) and asctime's "Sun Nov  6 08:49:37 1994". Names are case-sensitive; the
// day name is checked for spelling, not against the date. (Implemented in date.cpp.)
std::string http_date(std::int64_t unix_seconds);
bool parse_http_date(std::string_view text, std::int64_t& unix_seconds);

}  // namespace spoold::http
