// response, write_head, reason phrases, HTTP dates and MIME types (server/http/response.hpp,
// mime.hpp).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "http/mime.hpp"
#include "http/response.hpp"

namespace {

using spoold::http::error_response;
using spoold::http::http_date;
using spoold::http::parse_http_date;
using spoold::http::reason_phrase;
using spoold::http::response;
using spoold::http::write_head;

// A descriptor the test owns until it hands it to a response.
int open_dev_null() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << "open /dev/null: errno " << errno;
  return fd;
}

bool fd_is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// The value of header `name` in a head written by write_head; "" when absent.
std::string header_value(std::string_view head, std::string_view name) {
  const std::string key = "\r\n" + std::string(name) + ": ";
  const std::size_t at = head.find(key);
  if (at == std::string_view::npos) return "";
  const std::size_t from = at + key.size();
  return std::string(head.substr(from, head.find("\r\n", from) - from));
}

bool has_header(std::string_view head, std::string_view name) {
  return head.find("\r\n" + std::string(name) + ": ") != std::string_view::npos;
}

// ---------------------------------------------------------------------------------------------
// Reason phrases
// ---------------------------------------------------------------------------------------------

TEST(HttpResponse, ReasonPhrases) {
  const std::vector<std::pair<int, std::string_view>> known = {
      {100, "Continue"},
      {200, "OK"},
      {201, "Created"},
      {204, "No Content"},
      {206, "Partial Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {303, "See Other"},
      {304, "Not Modified"},
      {400, "Bad Request"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {411, "Length Required"},
      {413, "Content Too Large"},
      {414, "URI Too Long"},
      {415, "Unsupported Media Type"},
      {416, "Range Not Satisfiable"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {503, "Service Unavailable"},
      {505, "HTTP Version Not Supported"},
  };
  for (const auto& [status, phrase] : known) EXPECT_EQ(reason_phrase(status), phrase) << status;
  EXPECT_EQ(reason_phrase(299), "Unknown");
  EXPECT_EQ(reason_phrase(0), "Unknown");
  EXPECT_EQ(reason_phrase(-1), "Unknown");
}

// ---------------------------------------------------------------------------------------------
// The response object
// ---------------------------------------------------------------------------------------------

TEST(HttpResponse, AddHeader) {
  response r;
  r.add_header("Content-Type", "text/plain");
  r.add_header("X-Empty", "");
  EXPECT_EQ(r.headers, "Content-Type: text/plain\r\nX-Empty: \r\n");
}

TEST(HttpResponse, AddHeaderCannotSplitTheResponse) {
  response r;
  r.add_header("Location", "/a\r\nSet-Cookie: x=1\r\n\r\n<html>");
  r.add_header("X\n", "tab\tkept");
  EXPECT_EQ(r.headers, "Location: /a  Set-Cookie: x=1    <html>\r\nX : tab\tkept\r\n");
}

TEST(HttpResponse, BodyLengthFollowsTheBodyInUse) {
  response r;
  EXPECT_EQ(r.body_length(), 0u);
  r.body = "12345";
  EXPECT_EQ(r.body_length(), 5u);
  EXPECT_EQ(r.memory_body(), "12345");
  r.shared_body = std::make_shared<const std::string>("shared!");
  EXPECT_EQ(r.body_length(), 7u);  // a shared body wins over `body`
  EXPECT_EQ(r.memory_body(), "shared!");
  r.file_fd = open_dev_null();
  r.file_length = 1234;
  EXPECT_EQ(r.body_length(), 1234u);  // a file wins over both
}

TEST(HttpResponse, MoveTransfersTheFile) {
  const int fd = open_dev_null();
  {
    response a;
    a.status = 206;
    a.file_fd = fd;
    a.file_offset = 10;
    a.file_length = 20;
    a.body = "unused";
    a.close = true;
    response b(std::move(a));
    EXPECT_EQ(a.file_fd, -1);  // NOLINT(bugprone-use-after-move): the contract under test
    EXPECT_EQ(b.file_fd, fd);
    EXPECT_EQ(b.status, 206);
    EXPECT_EQ(b.file_offset, 10u);
    EXPECT_EQ(b.file_length, 20u);
    EXPECT_TRUE(b.close);
    EXPECT_TRUE(fd_is_open(fd));
    {
      response moved_out(std::move(a));  // the empty shell closes nothing
      (void)moved_out;
    }
    EXPECT_TRUE(fd_is_open(fd));
  }
  EXPECT_FALSE(fd_is_open(fd));  // b's destructor closed it
}

TEST(HttpResponse, MoveAssignmentClosesTheOldFile) {
  const int old_fd = open_dev_null();
  response a;
  a.file_fd = old_fd;
  const int new_fd = open_dev_null();
  {
    response b;
    b.file_fd = new_fd;
    b.status = 404;
    a = std::move(b);
    EXPECT_EQ(b.file_fd, -1);  // NOLINT(bugprone-use-after-move)
  }
  EXPECT_FALSE(fd_is_open(old_fd));
  EXPECT_TRUE(fd_is_open(new_fd));
  EXPECT_EQ(a.file_fd, new_fd);
  EXPECT_EQ(a.status, 404);
  response& self = a;
  a = std::move(self);  // self-move keeps the file
  EXPECT_TRUE(fd_is_open(new_fd));
  EXPECT_EQ(a.file_fd, new_fd);
}

TEST(HttpResponse, ErrorResponse) {
  const response r = error_response(404, "No <such> file");
  EXPECT_EQ(r.status, 404);
  EXPECT_FALSE(r.close);
  EXPECT_NE(r.body.find("<h1>404 Not Found</h1><p>No &lt;such&gt; file</p>"), std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("<title>404 Not Found</title>"), std::string::npos);
  EXPECT_EQ(r.headers, "Content-Type: text/html; charset=utf-8\r\n");
  EXPECT_EQ(r.body_length(), r.body.size());

  const response bare = error_response(500, "");
  EXPECT_NE(bare.body.find("<h1>500 Internal Server Error</h1></body>"), std::string::npos);
  EXPECT_EQ(bare.body.find("<p>"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// write_head
// ---------------------------------------------------------------------------------------------

TEST(HttpResponse, WriteHeadOk) {
  response r;
  r.body = "hello";
  r.add_header("Content-Type", "text/plain; charset=utf-8");
  std::string out = "previous bytes|";
  write_head(out, r, 1, true);
  ASSERT_EQ(out.rfind("previous bytes|", 0), 0u);  // appended, not replaced
  const std::string_view head = std::string_view(out).substr(15);
  EXPECT_EQ(head.substr(0, 17), "HTTP/1.1 200 OK\r\n");
  EXPECT_EQ(header_value(head, "Server"), "spoold/" SPOOLD_VERSION);
  EXPECT_EQ(header_value(head, "Content-Length"), "5");
  EXPECT_EQ(header_value(head, "Content-Type"), "text/plain; charset=utf-8");
  EXPECT_FALSE(has_header(head, "Connection"));
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  EXPECT_EQ(head.find("\r\n\r\n"), head.size() - 4);  // one blank line, at the end

  std::int64_t date = 0;
  ASSERT_TRUE(parse_http_date(header_value(head, "Date"), date)) << header_value(head, "Date");
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  EXPECT_LE(date, now);
  EXPECT_GE(date, now - 60);  // generous: the date is cached per second, not stale by more
}

TEST(HttpResponse, WriteHeadConnectionHeaders) {
  response r;
  std::string out;
  write_head(out, r, 1, false);
  EXPECT_EQ(header_value(out, "Connection"), "close");

  out.clear();
  write_head(out, r, 0, true);
  EXPECT_EQ(header_value(out, "Connection"), "keep-alive");

  out.clear();
  write_head(out, r, 0, false);
  EXPECT_EQ(header_value(out, "Connection"), "close");

  out.clear();
  r.close = true;
  write_head(out, r, 1, true);
  EXPECT_EQ(header_value(out, "Connection"), "close");
}

TEST(HttpResponse, WriteHeadContentLength) {
  response head_only;
  head_only.body = std::string(1000, 'x');
  head_only.head_only = true;
  std::string out;
  write_head(out, head_only, 1, true);
  EXPECT_EQ(header_value(out, "Content-Length"), "1000");

  response file;
  file.file_fd = open_dev_null();
  file.file_length = 123456789012;
  out.clear();
  write_head(out, file, 1, true);
  EXPECT_EQ(header_value(out, "Content-Length"), "123456789012");

  for (const int status : {204, 304}) {
    response r;
    r.status = status;
    out.clear();
    write_head(out, r, 1, true);
    EXPECT_FALSE(has_header(out, "Content-Length")) << status;
    EXPECT_TRUE(has_header(out, "Date")) << status;
  }

  response empty;
  out.clear();
  write_head(out, empty, 1, true);
  EXPECT_EQ(header_value(out, "Content-Length"), "0");
}

TEST(HttpResponse, WriteHeadInformational) {
  response r;
  r.status = 100;
  std::string out;
  write_head(out, r, 1, true);
  EXPECT_EQ(out, "HTTP/1.1 100 Continue\r\n\r\n");
}

TEST(HttpResponse, WriteHeadStatusLine) {
  response r = error_response(431, "");
  std::string out;
  write_head(out, r, 0, false);
  EXPECT_EQ(out.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0), 0u);
  EXPECT_EQ(header_value(out, "Content-Length"), std::to_string(r.body.size()));
  EXPECT_EQ(header_value(out, "Content-Type"), "text/html; charset=utf-8");
}

TEST(HttpResponse, WriteHeadFromSeveralThreads) {
  // The Date cache is per thread; threads writing heads at once must each get a whole, valid
  // Date line (run under ThreadSanitizer in the tsan build).
  auto write_many = [](int& valid) {
    response r;
    r.body = "x";
    std::string out;
    for (int i = 0; i < 2000; ++i) {
      out.clear();
      write_head(out, r, 1, true);
      std::int64_t date = 0;
      if (parse_http_date(header_value(out, "Date"), date)) ++valid;
    }
  };
  int valid_a = 0;
  int valid_b = 0;
  std::thread a(write_many, std::ref(valid_a));
  std::thread b(write_many, std::ref(valid_b));
  a.join();
  b.join();
  EXPECT_EQ(valid_a, 2000);
  EXPECT_EQ(valid_b, 2000);
}

// ---------------------------------------------------------------------------------------------
// Dates
// ---------------------------------------------------------------------------------------------

TEST(HttpDate, KnownValues) {
  EXPECT_EQ(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(http_date(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(http_date(1709164800), "Thu, 29 Feb 2024 00:00:00 GMT");
  EXPECT_EQ(http_date(4107542399), "Sun, 28 Feb 2100 23:59:59 GMT");
  EXPECT_EQ(http_date(4107542400), "Mon, 01 Mar 2100 00:00:00 GMT");  // 2100 is no leap year
  EXPECT_EQ(http_date(-1), "Wed, 31 Dec 1969 23:59:59 GMT");
  EXPECT_EQ(http_date(253402300799), "Fri, 31 Dec 9999 23:59:59 GMT");
}

TEST(HttpDate, ParsesAllThreeForms) {
  std::int64_t t = 0;
  ASSERT_TRUE(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", t));
  EXPECT_EQ(t, 784111777);
  t = 0;
  ASSERT_TRUE(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", t));
  EXPECT_EQ(t, 784111777);
  t = 0;
  ASSERT_TRUE(parse_http_date("Sun Nov  6 08:49:37 1994", t));
  EXPECT_EQ(t, 784111777);
  ASSERT_TRUE(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT", t));
  EXPECT_EQ(t, 0);
  ASSERT_TRUE(parse_http_date("Tuesday, 01-Jan-30 00:00:00 GMT", t));  // 2030
  EXPECT_EQ(t, 1893456000);
  ASSERT_TRUE(parse_http_date("Tue Feb 29 00:00:00 2000", t));
  EXPECT_EQ(t, 951782400);
}

TEST(HttpDate, RejectsMalformed) {
  const std::vector<std::string_view> bad = {
      "",
      "Sun, 06 Nov 1994 08:49:37 UTC",
      "Sun, 06 Nov 1994 08:49:37 GMT ",
      " Sun, 06 Nov 1994 08:49:37 GMT",
      "Sun, 6 Nov 1994 08:49:37 GMT",
      "sun, 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 nov 1994 08:49:37 GMT",
      "Xyz, 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 Foo 1994 08:49:37 GMT",
      "Sun, 00 Nov 1994 08:49:37 GMT",
      "Sun, 31 Nov 1994 08:49:37 GMT",
      "Sun, 29 Feb 1900 08:49:37 GMT",
      "Sun, 06 Nov 1994 24:00:00 GMT",
      "Sun, 06 Nov 1994 08:60:00 GMT",
      "Sun, 06 Nov 1994 08:49:61 GMT",
      "Sun, 06 Nov 1994 08-49-37 GMT",
      "Sun, 06 Nov 19x4 08:49:37 GMT",
      "Sun, 06 Nov 1994 08:49:37",
      "Sunday, 06-Nov-1994 08:49:37 GMT",
      "Sunday 06-Nov-94 08:49:37 GMT",
      "Sun Nov 6 08:49:37 1994",
      "Sun Nov  6 08:49:37 94",
      "1994-11-06T08:49:37Z",
      "784111777",
  };
  for (const std::string_view text : bad) {
    std::int64_t t = 42;
    EXPECT_FALSE(parse_http_date(text, t)) << text;
  }
}

TEST(HttpDate, RoundTrip) {
  // Every 7 hours 13 minutes and 1 second from 1900 to 2200: every weekday, month, leap rule.
  for (std::int64_t t = -2208988800; t < 7258118400; t += 7 * 3600 + 13 * 60 + 1) {
    const std::string text = http_date(t);
    ASSERT_EQ(text.size(), 29u) << t;
    std::int64_t back = 0;
    ASSERT_TRUE(parse_http_date(text, back)) << text;
    ASSERT_EQ(back, t) << text;
  }
}

// ---------------------------------------------------------------------------------------------
// MIME types
// ---------------------------------------------------------------------------------------------

TEST(HttpMime, KnownExtensions) {
  const std::vector<std::pair<std::string_view, std::string_view>> table = {
      {"index.html", "text/html; charset=utf-8"},
      {"old.htm", "text/html; charset=utf-8"},
      {"site.css", "text/css; charset=utf-8"},
      {"app.js", "text/javascript; charset=utf-8"},
      {"mod.mjs", "text/javascript; charset=utf-8"},
      {"data.json", "application/json"},
      {"notes.txt", "text/plain; charset=utf-8"},
      {"feed.xml", "application/xml"},
      {"logo.svg", "image/svg+xml"},
      {"a.png", "image/png"},
      {"a.jpg", "image/jpeg"},
      {"a.jpeg", "image/jpeg"},
      {"a.gif", "image/gif"},
      {"a.webp", "image/webp"},
      {"favicon.ico", "image/x-icon"},
      {"paper.pdf", "application/pdf"},
      {"mod.wasm", "application/wasm"},
      {"f.woff", "font/woff"},
      {"f.woff2", "font/woff2"},
      {"v.mp4", "video/mp4"},
      {"v.webm", "video/webm"},
      {"s.mp3", "audio/mpeg"},
      {"t.csv", "text/csv; charset=utf-8"},
      {"README.md", "text/markdown; charset=utf-8"},
      {"app.js.map", "application/json"},
  };
  for (const auto& [name, type] : table) EXPECT_EQ(spoold::http::mime_type(name), type) << name;
}

TEST(HttpMime, CaseAndPaths) {
  using spoold::http::mime_type;
  EXPECT_EQ(mime_type("INDEX.HTML"), "text/html; charset=utf-8");
  EXPECT_EQ(mime_type("Photo.JpEg"), "image/jpeg");
  EXPECT_EQ(mime_type("/var/www/site/a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(mime_type("/dir.html/file"), "application/octet-stream");  // the dot is a dir's
  EXPECT_EQ(mime_type("archive.tar.gz"), "application/octet-stream");
  EXPECT_EQ(mime_type("Makefile"), "application/octet-stream");
  EXPECT_EQ(mime_type(".html"), "application/octet-stream");  // a dot-file, no extension
  EXPECT_EQ(mime_type("trailing."), "application/octet-stream");
  EXPECT_EQ(mime_type(""), "application/octet-stream");
  EXPECT_EQ(mime_type("x.htmlx"), "application/octet-stream");
}

}  // namespace
