#include "http/response.hpp"

#include <unistd.h>

#include <charconv>
#include <ctime>
#include <utility>

#include "http/form.hpp"

#ifndef SPOOLD_VERSION
#error "SPOOLD_VERSION must be defined (server/CMakeLists.txt sets it from the project version)"
#endif

namespace spoold::http {

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 416:
      return "Range Not Satisfiable";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

namespace {

void close_file(int& fd) noexcept {
  if (fd >= 0) {
    // Nothing to act on if close fails here: the descriptor was only read from (sendfile), and
    // on Linux it is released even when close reports EINTR, so retrying would be wrong.
    (void)::close(fd);
    fd = -1;
  }
}

// A header value that carried CR or LF would end the header early and let the rest be read as
// further headers or a second response (response splitting), e.g. a Location built from a
// decoded path. Control characters other than HTAB are therefore replaced by spaces.
void append_header_text(std::string& out, std::string_view text) {
  const std::size_t at = out.size();
  out.append(text);
  for (std::size_t i = at; i < out.size(); ++i) {
    const auto c = static_cast<unsigned char>(out[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) out[i] = ' ';
  }
}

void append_number(std::string& out, std::uint64_t n) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  (void)ec;  // 24 bytes hold any 64-bit number
  out.append(digits, static_cast<std::size_t>(end - digits));
}

// "Server: ...\r\nDate: ...\r\n", rebuilt at most once a second per thread: formatting a date
// costs far more than copying 60 bytes, and write_head runs for every response.
std::string_view server_and_date_lines() {
  struct cache {
    std::int64_t second = -1;
    std::string lines;
  };
  thread_local cache c;
  const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
  if (now != c.second) {
    c.second = now;
    c.lines.clear();
    c.lines.append("Server: spoold/" SPOOLD_VERSION "\r\nDate: ");
    c.lines.append(http_date(now));
    c.lines.append("\r\n");
  }
  return c.lines;
}

}  // namespace

response::response(response&& o) noexcept
    : status(o.status),
      headers(std::move(o.headers)),
      body(std::move(o.body)),
      shared_body(std::move(o.shared_body)),
      file_fd(std::exchange(o.file_fd, -1)),
      file_offset(o.file_offset),
      file_length(o.file_length),
      head_only(o.head_only),
      close(o.close) {}

response& response::operator=(response&& o) noexcept {
  if (this != &o) {
    close_file(file_fd);
    status = o.status;
    headers = std::move(o.headers);
    body = std::move(o.body);
    shared_body = std::move(o.shared_body);
    file_fd = std::exchange(o.file_fd, -1);
    file_offset = o.file_offset;
    file_length = o.file_length;
    head_only = o.head_only;
    close = o.close;
  }
  return *this;
}

response::~response() { close_file(file_fd); }

void response::add_header(std::string_view name, std::string_view value) {
  append_header_text(headers, name);
  headers.append(": ");
  append_header_text(headers, value);
  headers.append("\r\n");
}

std::uint64_t response::body_length() const noexcept {
  if (file_fd >= 0) return file_length;
  return memory_body().size();
}

std::string_view response::memory_body() const noexcept {
  if (shared_body) return *shared_body;
  return body;
}

response error_response(int status, std::string_view detail) {
  response r;
  r.status = status;
  std::string title;
  append_number(title, static_cast<std::uint64_t>(status < 0 ? 0 : status));
  title.push_back(' ');
  title.append(reason_phrase(status));
  r.body.reserve(160 + 2 * title.size() + detail.size());
  r.body.append("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>");
  r.body.append(title);
  r.body.append("</title></head>\n<body><h1>");
  r.body.append(title);
  r.body.append("</h1>");
  if (!detail.empty()) {
    r.body.append("<p>");
    r.body.append(html_escape(detail));
    r.body.append("</p>");
  }
  r.body.append("</body></html>\n");
  r.add_header("Content-Type", "text/html; charset=utf-8");
  return r;
}

void write_head(std::string& out, const response& r, int version_minor, bool keep_alive) {
  // The status line names HTTP/1.1 for HTTP/1.0 clients as well: a server sends the highest
  // minor version it conforms to (RFC 9110, 6.2), and the client reads the response as 1.0.
  out.append("HTTP/1.1 ");
  append_number(out, static_cast<std::uint64_t>(r.status < 0 ? 0 : r.status));
  out.push_back(' ');
  out.append(reason_phrase(r.status));
  out.append("\r\n");

  if (r.status >= 100 && r.status < 200) {
    // Informational: the final response follows on the same connection, which carries the
    // Date, Server and connection headers.
    out.append(r.headers);
    out.append("\r\n");
    return;
  }

  out.append(server_and_date_lines());
  if (r.status != 204 && r.status != 304) {
    out.append("Content-Length: ");
    append_number(out, r.body_length());
    out.append("\r\n");
  }
  if (!keep_alive || r.close) {
    out.append("Connection: close\r\n");
  } else if (version_minor == 0) {
    out.append("Connection: keep-alive\r\n");
  }
  out.append(r.headers);
  out.append("\r\n");
}

}  // namespace spoold::http
