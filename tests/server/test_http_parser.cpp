// parse_request and the request-target rules (server/http/parser.hpp, target.hpp).
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "http/parser.hpp"
#include "http/target.hpp"
#include "http_prefixes.hpp"

namespace {

using spoold::http::limits;
using spoold::http::method;
using spoold::http::parse_request;
using spoold::http::parse_result;
using spoold::http::parse_status;
using spoold::http::request;

parse_result parse(std::string_view buffer, request& out, const limits& lim = {}) {
  return parse_request(buffer, lim, out);
}

parse_result parse(std::string_view buffer, const limits& lim = {}) {
  request out;
  return parse_request(buffer, lim, out);
}

// True when `inner` lies within `outer` (an empty view anywhere counts: it points at nothing).
bool inside(std::string_view inner, std::string_view outer) {
  if (inner.empty()) return true;
  return inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size();
}

// ---------------------------------------------------------------------------------------------
// Well-formed requests
// ---------------------------------------------------------------------------------------------

TEST(HttpParser, TypicalBrowserGet) {
  const std::string_view in =
      "GET /docs/index.html?lang=en&x=1 HTTP/1.1\r\n"
      "Host: example.com\r\n"
      "User-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n"
      "Accept: text/html,application/xhtml+xml;q=0.9,*/*;q=0.8\r\n"
      "Accept-Language: en-US,en;q=0.5\r\n"
      "Accept-Encoding: gzip, deflate, br\r\n"
      "Connection: keep-alive\r\n"
      "Upgrade-Insecure-Requests: 1\r\n"
      "Cache-Control: max-age=0\r\n"
      "\r\n";
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, in.size());
  EXPECT_EQ(res.error_status, 0);
  EXPECT_FALSE(res.needs_continue);
  EXPECT_EQ(r.verb, method::get);
  EXPECT_EQ(r.method_text, "GET");
  EXPECT_EQ(r.target, "/docs/index.html?lang=en&x=1");
  EXPECT_EQ(r.path, "/docs/index.html");
  EXPECT_EQ(r.query, "lang=en&x=1");
  EXPECT_EQ(r.version_minor, 1);
  EXPECT_TRUE(r.keep_alive);
  EXPECT_FALSE(r.expect_continue);
  EXPECT_EQ(r.content_length, 0u);
  EXPECT_TRUE(r.body.empty());
  ASSERT_EQ(r.headers.size(), 8u);
  EXPECT_EQ(r.headers[0].name, "Host");
  EXPECT_EQ(r.headers[0].value, "example.com");
  EXPECT_EQ(r.headers[3].value, "en-US,en;q=0.5");
  for (const auto& h : r.headers) {
    EXPECT_TRUE(inside(h.name, in));
    EXPECT_TRUE(inside(h.value, in));
  }
  EXPECT_TRUE(inside(r.method_text, in));
  EXPECT_TRUE(inside(r.target, in));
  EXPECT_TRUE(inside(r.query, in));
}

TEST(HttpParser, HeaderLookupIsCaseInsensitive) {
  request r;
  ASSERT_EQ(parse("GET / HTTP/1.1\r\nHost: h\r\nX-Thing: one\r\nx-thing: two\r\n"
                  "CONTENT-TYPE: text/plain\r\n\r\n",
                  r)
                .status,
            parse_status::complete);
  ASSERT_NE(r.find("host"), nullptr);
  EXPECT_EQ(r.find("HOST")->value, "h");
  ASSERT_NE(r.find("x-THING"), nullptr);
  EXPECT_EQ(r.find("x-THING")->value, "one");  // the first of repeated headers
  ASSERT_NE(r.find("Content-Type"), nullptr);
  EXPECT_EQ(r.find("content-type")->value, "text/plain");
  EXPECT_EQ(r.find("Content-Length"), nullptr);
  EXPECT_EQ(r.find("Hos"), nullptr);
  EXPECT_EQ(r.find(""), nullptr);
}

TEST(HttpParser, HeaderValuesAreTrimmed) {
  request r;
  ASSERT_EQ(parse("GET / HTTP/1.1\r\nHost:h\r\nA:   spaced  out \t \r\nB:\r\nC: \t\r\n"
                  "D: x\tinner\ttabs\r\nE: caf\xc3\xa9\r\n\r\n",
                  r)
                .status,
            parse_status::complete);
  EXPECT_EQ(r.find("Host")->value, "h");
  EXPECT_EQ(r.find("A")->value, "spaced  out");
  EXPECT_EQ(r.find("B")->value, "");
  EXPECT_EQ(r.find("C")->value, "");
  EXPECT_EQ(r.find("D")->value, "x\tinner\ttabs");
  EXPECT_EQ(r.find("E")->value, "caf\xc3\xa9");  // obs-text bytes pass
}

TEST(HttpParser, BareLfLineEnds) {
  const std::string_view in = "GET /a HTTP/1.1\nHost: h\nX: y\n\n";
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, in.size());
  EXPECT_EQ(r.find("x")->value, "y");
  EXPECT_EQ(r.path, "/a");
}

TEST(HttpParser, MixedLineEnds) {
  const std::string_view in = "GET / HTTP/1.1\r\nHost: h\nX: y\r\n\n";
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, in.size());
  EXPECT_EQ(r.find("X")->value, "y");
}

TEST(HttpParser, LeadingEmptyLinesAreSkippedAndConsumed) {
  const std::string_view in = "\r\n\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, in.size());
  EXPECT_EQ(r.method_text, "GET");

  EXPECT_EQ(parse("\r\n").status, parse_status::incomplete);
  EXPECT_EQ(parse("\r").status, parse_status::incomplete);
  EXPECT_EQ(parse("").status, parse_status::incomplete);
  const parse_result too_many = parse(std::string(40, '\n') + "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(too_many.status, parse_status::error);
  EXPECT_EQ(too_many.error_status, 400);
}

TEST(HttpParser, AllMethods) {
  const std::vector<std::pair<std::string_view, method>> methods = {
      {"GET", method::get},     {"HEAD", method::head},   {"POST", method::post},
      {"PUT", method::put},     {"DELETE", method::del},  {"OPTIONS", method::options},
      {"PATCH", method::patch}, {"TRACE", method::trace}, {"CONNECT", method::connect},
  };
  for (const auto& [text, verb] : methods) {
    const std::string in = std::string(text) + " /x HTTP/1.1\r\nHost: h\r\n\r\n";
    request r;
    ASSERT_EQ(parse(in, r).status, parse_status::complete) << text;
    EXPECT_EQ(r.verb, verb) << text;
    EXPECT_EQ(r.method_text, text);
    EXPECT_EQ(spoold::http::method_name(verb), text);
  }
}

TEST(HttpParser, Http10WithoutHost) {
  request r;
  ASSERT_EQ(parse("GET / HTTP/1.0\r\n\r\n", r).status, parse_status::complete);
  EXPECT_EQ(r.version_minor, 0);
  EXPECT_FALSE(r.keep_alive);
}

TEST(HttpParser, RepeatedEqualContentLengthIsAccepted) {
  request r;
  const std::string_view in =
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\ncontent-length: 003\r\n\r\nabc";
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(r.content_length, 3u);
  EXPECT_EQ(r.body, "abc");
}

// ---------------------------------------------------------------------------------------------
// Bodies, pipelining, incremental input
// ---------------------------------------------------------------------------------------------

TEST(HttpParser, BodyIsExactlyContentLengthBytes) {
  const std::string head = "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
  const std::string in = head + "hello world" + "GET";  // the start of a next request follows
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, head.size() + 11);
  EXPECT_EQ(r.content_length, 11u);
  EXPECT_EQ(r.body, "hello world");
  EXPECT_TRUE(inside(r.body, in));

  const parse_result partial = parse(std::string_view(in).substr(0, head.size() + 5), r);
  EXPECT_EQ(partial.status, parse_status::incomplete);
  EXPECT_FALSE(partial.needs_continue);  // no Expect header
}

TEST(HttpParser, ZeroContentLength) {
  const std::string_view in = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, in.size());
  EXPECT_TRUE(r.body.empty());
}

TEST(HttpParser, PipelinedRequestsAreConsumedExactly) {
  const std::string first = "GET /one HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::string second = "POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody";
  const std::string third = "HEAD /three HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  const std::string in = first + second + third;
  std::string_view rest = in;
  request r;

  parse_result res = parse(rest, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, first.size());
  EXPECT_EQ(r.path, "/one");
  rest.remove_prefix(res.consumed);

  res = parse(rest, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, second.size());
  EXPECT_EQ(r.path, "/two");
  EXPECT_EQ(r.body, "body");
  rest.remove_prefix(res.consumed);

  res = parse(rest, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, third.size());
  EXPECT_EQ(r.verb, method::head);
  EXPECT_FALSE(r.keep_alive);
  EXPECT_TRUE(r.body.empty());
  rest.remove_prefix(res.consumed);
  EXPECT_TRUE(rest.empty());
  EXPECT_EQ(parse(rest, r).status, parse_status::incomplete);
}

using spoold::http::testing_support::expect_prefixes_consistent;

TEST(HttpParser, ByteByByteFeedingGivesIncompleteThenTheSameResult) {
  const std::vector<std::string_view> inputs = {
      "GET /a/b?c=d HTTP/1.1\r\nHost: h\r\nX-Long-Header-Name: some value\r\n\r\n",
      "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789",
      "\r\nGET / HTTP/1.0\nConnection: keep-alive\n\n",
  };
  for (const std::string_view in : inputs) {
    request whole;
    const parse_result expected = parse(in, whole);
    ASSERT_EQ(expected.status, parse_status::complete);
    ASSERT_EQ(expected.consumed, in.size());

    std::string fed;
    request r;
    for (std::size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(parse(fed, r).status, parse_status::incomplete) << "after " << i << " bytes";
      fed.push_back(in[i]);
    }
    const parse_result last = parse(fed, r);
    ASSERT_EQ(last.status, parse_status::complete);
    EXPECT_EQ(last.consumed, expected.consumed);
    EXPECT_EQ(r.path, whole.path);
    EXPECT_EQ(r.query, whole.query);
    EXPECT_EQ(r.headers.size(), whole.headers.size());
    EXPECT_EQ(r.body, whole.body);
    EXPECT_EQ(r.keep_alive, whole.keep_alive);
    expect_prefixes_consistent(in);
  }
}

TEST(HttpParser, ReusedRequestIsReset) {
  request r;
  ASSERT_EQ(parse("POST /a?q HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nConnection: close\r\n"
                  "Content-Length: 2\r\n\r\nok",
                  r)
                .status,
            parse_status::complete);
  EXPECT_TRUE(r.expect_continue);
  const std::size_t capacity = r.headers.capacity();
  ASSERT_EQ(parse("GET /b HTTP/1.1\r\nHost: h\r\n\r\n", r).status, parse_status::complete);
  EXPECT_EQ(r.verb, method::get);
  EXPECT_EQ(r.path, "/b");
  EXPECT_EQ(r.query, "");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_FALSE(r.expect_continue);
  EXPECT_EQ(r.content_length, 0u);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers.capacity(), capacity);  // clear() keeps the allocation
}

// ---------------------------------------------------------------------------------------------
// 100-continue and keep-alive
// ---------------------------------------------------------------------------------------------

TEST(HttpParser, ExpectContinue) {
  const std::string head =
      "POST /up HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n";
  request r;
  parse_result res = parse(head, r);
  EXPECT_EQ(res.status, parse_status::incomplete);
  EXPECT_TRUE(res.needs_continue);
  EXPECT_TRUE(r.expect_continue);

  res = parse(head + "ab", r);  // the client went ahead without waiting
  EXPECT_EQ(res.status, parse_status::incomplete);
  EXPECT_FALSE(res.needs_continue);

  const std::string whole = head + "abcde";  // r's views point into it
  res = parse(whole, r);
  EXPECT_EQ(res.status, parse_status::complete);
  EXPECT_FALSE(res.needs_continue);
  EXPECT_EQ(r.body, "abcde");

  // Nothing to wait for without a body.
  res = parse("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n", r);
  EXPECT_EQ(res.status, parse_status::complete);
  EXPECT_FALSE(res.needs_continue);

  // Not while the head is incomplete.
  res = parse("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 9\r\n", r);
  EXPECT_EQ(res.status, parse_status::incomplete);
  EXPECT_FALSE(res.needs_continue);

  // An HTTP/1.0 client's Expect is ignored.
  res = parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n", r);
  EXPECT_EQ(res.status, parse_status::incomplete);
  EXPECT_FALSE(res.needs_continue);
  EXPECT_FALSE(r.expect_continue);

  // Other expectations are not 100-continue.
  res = parse("POST / HTTP/1.1\r\nHost: h\r\nExpect: something\r\nContent-Length: 9\r\n\r\n", r);
  EXPECT_EQ(res.status, parse_status::incomplete);
  EXPECT_FALSE(res.needs_continue);

  // Too large: refused at once, without asking for the body.
  res = parse(
      "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 99999999\r\n"
      "\r\n",
      r);
  EXPECT_EQ(res.status, parse_status::error);
  EXPECT_EQ(res.error_status, 413);
}

TEST(HttpParser, LaterHttp1MinorVersionsAreHttp11) {
  // RFC 9110, 2.5: a later minor version is answered as the highest this server speaks.
  for (const char* version : {"HTTP/1.2", "HTTP/1.9"}) {
    request r;
    const std::string in = std::string("GET / ") + version + "\r\nHost: h\r\n\r\n";
    ASSERT_EQ(parse(in, r).status, parse_status::complete) << version;
    EXPECT_EQ(r.version_minor, 1) << version;
    EXPECT_TRUE(r.keep_alive) << version;
    // And an HTTP/1.1 request it is: Host is required.
    EXPECT_EQ(parse(std::string("GET / ") + version + "\r\n\r\n").error_status, 400) << version;
  }
}

TEST(HttpParser, ValidHostValues) {
  for (const char* host :
       {"example.com", "example.com:8080", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:8080",
        "[2001:db8::7]", "[::ffff:192.0.2.1]", "[v1.fe80::a+en1]", "xn--caf-dma.example",
        "a-b_c~d!$&'()*+,;=", "h%41", "h:", "", "localhost:0"}) {
    request r;
    const std::string in = std::string("GET / HTTP/1.1\r\nHost: ") + host + "\r\n\r\n";
    EXPECT_EQ(parse(in, r).status, parse_status::complete) << host;
  }
}

TEST(HttpParser, BareCrIsRefusedAsSoonAsTheNextByteArrives) {
  // A CR at the end of the buffer may be followed by its LF: not an error yet.
  EXPECT_EQ(parse("GET / HTTP/1.1\r").status, parse_status::incomplete);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: h\r").status, parse_status::incomplete);
  // The next byte decides, with no LF anywhere after it.
  EXPECT_EQ(parse("GET / HTTP/1.1\rH").error_status, 400);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: h\rX").error_status, 400);
  EXPECT_EQ(parse("GET /a\rb").error_status, 400);
}

TEST(HttpParser, KeepAliveRules) {
  struct row {
    std::string_view version;
    std::string_view connection_lines;
    bool keep_alive;
  };
  const std::vector<row> rows = {
      {"1.1", "", true},
      {"1.1", "Connection: close\r\n", false},
      {"1.1", "Connection: Close\r\n", false},
      {"1.1", "Connection: keep-alive\r\n", true},
      {"1.1", "Connection: Upgrade, CLOSE\r\n", false},
      {"1.1", "Connection: te,close , foo\r\n", false},
      {"1.1", "Connection: closed\r\n", true},  // a different token
      {"1.1", "Connection: foo\r\nConnection: close\r\n", false},
      {"1.0", "", false},
      {"1.0", "Connection: keep-alive\r\n", true},
      {"1.0", "Connection: Keep-Alive\r\n", true},
      {"1.0", "Connection: foo,  keep-alive\r\n", true},
      {"1.0", "Connection: keep-alive, close\r\n", false},
      {"1.0", "Connection: close\r\n", false},
      {"1.0", "Connection: keep-alived\r\n", false},
  };
  for (const row& t : rows) {
    const std::string in = "GET / HTTP/" + std::string(t.version) + "\r\nHost: h\r\n" +
                           std::string(t.connection_lines) + "\r\n";
    request r;
    ASSERT_EQ(parse(in, r).status, parse_status::complete) << in;
    EXPECT_EQ(r.keep_alive, t.keep_alive) << in;
  }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

struct error_case {
  std::string_view name;
  std::string input;
  int status;
  limits lim = {};
};

limits small_limits() {
  limits lim;
  lim.max_request_line = 32;
  lim.max_head = 128;
  lim.max_headers = 3;
  lim.max_body = 10;
  return lim;
}

std::vector<error_case> error_cases() {
  const std::string host = "Host: h\r\n";
  return {
      // 400: request line
      {"method lower case is unknown, not malformed", "get / HTTP/1.1\r\n" + host + "\r\n", 501},
      {"no version (HTTP/0.9 style)", "GET /\r\n\r\n", 400},
      {"two spaces after method", "GET  / HTTP/1.1\r\n" + host + "\r\n", 400},
      {"space inside target", "GET /a b HTTP/1.1\r\n" + host + "\r\n", 400},
      {"trailing space", "GET / HTTP/1.1 \r\n" + host + "\r\n", 400},
      {"leading space", " GET / HTTP/1.1\r\n" + host + "\r\n", 400},
      {"tab separator", "GET\t/ HTTP/1.1\r\n" + host + "\r\n", 400},
      {"garbage version", "GET / HTTP/1.x\r\n" + host + "\r\n", 400},
      {"wrong protocol name", "GET / HTTX/1.1\r\n" + host + "\r\n", 400},
      {"lower-case protocol name", "GET / http/1.1\r\n" + host + "\r\n", 400},
      {"three-digit version", "GET / HTTP/1.10\r\n" + host + "\r\n", 400},
      {"bare CR in request line", "GET /a\rb HTTP/1.1\r\n" + host + "\r\n", 400},
      {"bare CR before the request line", "\rGET / HTTP/1.1\r\n" + host + "\r\n", 400},
      {"control character in target", std::string("GET /a\x01 HTTP/1.1\r\n") + host + "\r\n", 400},
      {"DEL in target", "GET /a\x7f HTTP/1.1\r\n" + host + "\r\n", 400},
      {"TLS handshake", std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11), 400},
      {"NUL in method", std::string("GE\0T", 4) + " / HTTP/1.1\r\n" + host + "\r\n", 400},
      // 400: target and path
      {"relative target", "GET a/b HTTP/1.1\r\n" + host + "\r\n", 400},
      {"authority form", "CONNECT example.com:443 HTTP/1.1\r\n" + host + "\r\n", 400},
      {"asterisk for GET", "GET * HTTP/1.1\r\n" + host + "\r\n", 400},
      {"absolute form without host", "GET http:///x HTTP/1.1\r\n" + host + "\r\n", 400},
      {"unknown scheme", "GET ftp://h/x HTTP/1.1\r\n" + host + "\r\n", 400},
      {"percent at end", "GET /a% HTTP/1.1\r\n" + host + "\r\n", 400},
      {"percent one digit", "GET /a%4 HTTP/1.1\r\n" + host + "\r\n", 400},
      {"percent non-hex", "GET /a%zz HTTP/1.1\r\n" + host + "\r\n", 400},
      {"encoded NUL", "GET /a%00b HTTP/1.1\r\n" + host + "\r\n", 400},
      {"climb above root", "GET /.. HTTP/1.1\r\n" + host + "\r\n", 400},
      {"climb after descent", "GET /a/../../etc/passwd HTTP/1.1\r\n" + host + "\r\n", 400},
      {"encoded climb", "GET /%2e%2e/etc HTTP/1.1\r\n" + host + "\r\n", 400},
      {"encoded slash climb", "GET /a%2F..%2F..%2Fetc HTTP/1.1\r\n" + host + "\r\n", 400},
      // 400: headers
      {"obs-fold", "GET / HTTP/1.1\r\n" + host + "X: a\r\n  continued\r\n\r\n", 400},
      {"obs-fold with tab", "GET / HTTP/1.1\r\n" + host + "X: a\r\n\tcontinued\r\n\r\n", 400},
      {"first header line folded", "GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400},
      {"no colon", "GET / HTTP/1.1\r\n" + host + "NoColon\r\n\r\n", 400},
      {"empty name", "GET / HTTP/1.1\r\n" + host + ": v\r\n\r\n", 400},
      {"invalid name char", "GET / HTTP/1.1\r\n" + host + "Bad(Name): v\r\n\r\n", 400},
      {"slash in name", "GET / HTTP/1.1\r\n" + host + "A/B: v\r\n\r\n", 400},
      {"NUL in value", "GET / HTTP/1.1\r\n" + host + std::string("X: a\0b\r\n\r\n", 10), 400},
      {"CR in value", "GET / HTTP/1.1\r\n" + host + "X: a\rb\r\n\r\n", 400},
      {"escape in value", "GET / HTTP/1.1\r\n" + host + "X: a\x1b[0m\r\n\r\n", 400},
      {"DEL in value", "GET / HTTP/1.1\r\n" + host + "X: a\x7f\r\n\r\n", 400},
      {"missing Host on 1.1", "GET / HTTP/1.1\r\nX: y\r\n\r\n", 400},
      {"two Host headers", "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400},
      {"Content-Length not a number", "POST / HTTP/1.1\r\n" + host + "Content-Length: abc\r\n\r\n",
       400},
      {"Content-Length negative", "POST / HTTP/1.1\r\n" + host + "Content-Length: -1\r\n\r\n", 400},
      {"Content-Length plus sign", "POST / HTTP/1.1\r\n" + host + "Content-Length: +1\r\n\r\n",
       400},
      {"Content-Length empty", "POST / HTTP/1.1\r\n" + host + "Content-Length:\r\n\r\n", 400},
      {"Content-Length list", "POST / HTTP/1.1\r\n" + host + "Content-Length: 1, 1\r\n\r\n", 400},
      {"Content-Length inner space", "POST / HTTP/1.1\r\n" + host + "Content-Length: 1 2\r\n\r\n",
       400},
      {"Content-Length overflow",
       "POST / HTTP/1.1\r\n" + host + "Content-Length: 18446744073709551616\r\n\r\n", 400},
      {"Content-Length conflict",
       "POST / HTTP/1.1\r\n" + host + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
      // 400: Host (RFC 9112, 3.2; RFC 3986 host [":" port])
      {"Host with space and slash", "GET / HTTP/1.1\r\nHost: a b/c\r\n\r\n", 400},
      {"Host with path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400},
      {"Host with userinfo", "GET / HTTP/1.1\r\nHost: u@h\r\n\r\n", 400},
      {"Host with letter port", "GET / HTTP/1.1\r\nHost: h:8x\r\n\r\n", 400},
      {"Host with two ports", "GET / HTTP/1.1\r\nHost: h:1:2\r\n\r\n", 400},
      {"Host bad percent", "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", 400},
      {"Host bare IPv6", "GET / HTTP/1.1\r\nHost: ::1\r\n\r\n", 400},
      {"Host bad IP literal", "GET / HTTP/1.1\r\nHost: [::g]\r\n\r\n", 400},
      {"Host unclosed IP literal", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400},
      {"Host IP literal with zone", "GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n", 400},
      {"Host junk after IP literal", "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", 400},
      {"bad Host on HTTP/1.0 too", "GET / HTTP/1.0\r\nHost: a b\r\n\r\n", 400},
      // 400: a bare CR as a line end, refused before any LF arrives
      {"bare CR ends the request line", "GET / HTTP/1.1\rHost: h\r", 400},
      {"bare CR ends a header line", "GET / HTTP/1.1\r\nHost: h\rX: y\r", 400},
      {"bare CR ends the head", "GET / HTTP/1.1\r\nHost: h\r\n\rx", 400},
      // 400: Transfer-Encoding framing (RFC 9112, 6.1 and 6.3)
      {"Transfer-Encoding beside Content-Length",
       "POST / HTTP/1.1\r\n" + host + "Content-Length: 3\r\ntransfer-encoding: chunked\r\n\r\n",
       400},
      {"Content-Length after Transfer-Encoding",
       "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
       400},
      {"Transfer-Encoding in HTTP/1.0",
       "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"chunked twice",
       "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, chunked\r\n\r\n", 400},
      {"chunked twice in two headers",
       "POST / HTTP/1.1\r\n" + host +
           "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
       400},
      {"chunked with a parameter",
       "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked;q=1\r\n\r\n", 400},
      {"empty Transfer-Encoding", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: \r\n\r\n",
       400},
      {"Transfer-Encoding not a token",
       "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: \"chunked\"\r\n\r\n", 400},
      // 413: the head alone decides
      {"body too large", "POST / HTTP/1.1\r\n" + host + "Content-Length: 65537\r\n\r\n", 413},
      {"body largest number",
       "POST / HTTP/1.1\r\n" + host + "Content-Length: 18446744073709551615\r\n\r\n", 413},
      {"body one over a small limit", "POST / HTTP/1.1\r\n" + host + "Content-Length: 11\r\n\r\n",
       413, small_limits()},
      // 414
      {"request line too long, no line end yet", "GET /" + std::string(9000, 'a'), 414},
      {"request line too long with line end",
       "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n" + host + "\r\n", 414},
      {"request line one over a small limit", "GET /" + std::string(19, 'a') + " HTTP/1.1\r\n", 414,
       small_limits()},
      // 431
      {"head too large, no blank line yet",
       "GET / HTTP/1.1\r\n" + host + "X: " + std::string(17000, 'v'), 431},
      {"head too large with blank line",
       "GET / HTTP/1.1\r\n" + host + "X: " + std::string(17000, 'v') + "\r\n\r\n", 431},
      {"too many headers", "GET / HTTP/1.1\r\n" + host + "A: 1\r\nB: 2\r\nC: 3\r\n\r\n", 431,
       small_limits()},
      // 501
      {"unknown method", "BREW /pot HTTP/1.1\r\n" + host + "\r\n", 501},
      {"transfer coding gzip", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n",
       501},
      {"gzip before chunked",
       "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"coding after chunked",
       "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nTransfer-Encoding: br\r\n\r\n",
       501},
      {"identity is not a coding any more",
       "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: identity\r\n\r\n", 501},
      {"gzip beside Content-Length",
       "POST / HTTP/1.1\r\n" + host + "Content-Length: 3\r\nTransfer-Encoding: gzip\r\n\r\nabc",
       501},
      {"very long method token", std::string(40, 'X'), 501},
      {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 501},
      // 505
      {"HTTP/2.0", "GET / HTTP/2.0\r\n" + host + "\r\n", 505},
      {"HTTP/0.9", "GET / HTTP/0.9\r\n" + host + "\r\n", 505},
      {"HTTP/3.1", "GET / HTTP/3.1\r\n" + host + "\r\n", 505},
  };
}

TEST(HttpParser, ErrorStatuses) {
  for (const error_case& c : error_cases()) {
    request r;
    const parse_result res = parse_request(c.input, c.lim, r);
    EXPECT_EQ(res.status, parse_status::error) << c.name;
    EXPECT_EQ(res.error_status, c.status) << c.name;
    EXPECT_FALSE(res.error_reason.empty()) << c.name;
    EXPECT_EQ(res.consumed, 0u) << c.name;
  }
}

TEST(HttpParser, ErrorsAreTheSameForEveryPrefix) {
  for (const error_case& c : error_cases()) {
    SCOPED_TRACE(std::string(c.name));
    expect_prefixes_consistent(c.input, c.lim);
  }
}

TEST(HttpParser, OversizedInputIsRefusedBeforeItEnds) {
  // The connection must be able to stop reading: a too-long request line or head is an error
  // as soon as its size is known, not only once its line end arrives.
  const limits lim = small_limits();
  EXPECT_EQ(parse("GET /" + std::string(40, 'a'), lim).error_status, 414);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(200, 'a'), lim).error_status,
            431);
  // A CR at the end of a line exactly at the limit may still be followed by its LF.
  const std::string at_limit = "GET /" + std::string(32 - 14, 'a') + " HTTP/1.1";
  ASSERT_EQ(at_limit.size(), 32u);
  EXPECT_EQ(parse(at_limit + "\r", lim).status, parse_status::incomplete);
  EXPECT_EQ(parse(at_limit + "\r\nHost: h\r\n\r\n", lim).status, parse_status::complete);
}

TEST(HttpParser, LimitsAreInclusive) {
  const limits lim = small_limits();
  // Request line of exactly max_request_line bytes.
  const std::string line = "GET /" + std::string(32 - 14, 'a') + " HTTP/1.1";
  ASSERT_EQ(line.size(), lim.max_request_line);
  EXPECT_EQ(parse(line + "\r\nHost: h\r\n\r\n", lim).status, parse_status::complete);
  EXPECT_EQ(parse(line + "\nHost: h\n\n", lim).status, parse_status::complete);

  // Exactly max_headers header lines.
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", lim).status,
            parse_status::complete);

  // A head (request line, headers, blank line) of exactly max_head bytes, then one more.
  const std::string start = "GET / HTTP/1.1\r\nHost: h\r\nX: ";
  const std::string filler(lim.max_head - start.size() - 4, 'v');
  const std::string exact = start + filler + "\r\n\r\n";
  ASSERT_EQ(exact.size(), lim.max_head);
  EXPECT_EQ(parse(exact, lim).status, parse_status::complete);
  EXPECT_EQ(parse(start + filler + "v\r\n\r\n", lim).error_status, 431);

  // Content-Length equal to max_body.
  request r;
  const parse_result res =
      parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789", r, lim);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(r.body, "0123456789");
}

// ---------------------------------------------------------------------------------------------
// The request target and its path
// ---------------------------------------------------------------------------------------------

struct path_case {
  std::string_view target;
  std::string_view path;  // expected decoded, normalised path; empty: 400 expected
  std::string_view query;
};

TEST(HttpParser, PathNormalisation) {
  const std::vector<path_case> cases = {
      {"/", "/", ""},
      {"/index.html", "/index.html", ""},
      {"/dir/", "/dir/", ""},
      {"/a/./b/../c", "/a/c", ""},
      {"/a/b/..", "/a/", ""},
      {"/a/b/../", "/a/", ""},
      {"/a/.", "/a/", ""},
      {"/a/./", "/a/", ""},
      {"/./", "/", ""},
      {"/a/b/../../", "/", ""},
      {"/a/b/../..", "/", ""},
      {"//a///b//", "/a/b/", ""},
      {"/a/.../b", "/a/.../b", ""},
      {"/a/..b/.c", "/a/..b/.c", ""},
      {"/%41%62c", "/Abc", ""},
      {"/caf%C3%A9", "/caf\xc3\xa9", ""},
      {"/a%2Fb", "/a/b", ""},
      {"/a%2f%2fb", "/a/b", ""},
      {"/a/%2e%2e/b", "/b", ""},
      {"/a/%2E/b", "/a/b", ""},
      {"/a/%2e%2E", "/", ""},
      {"/a+b%20c", "/a+b c", ""},
      {"/%25", "/%", ""},
      {"/q?", "/q", ""},
      {"/q?a=1&b=%20", "/q", "a=1&b=%20"},
      {"/q?a=?b", "/q", "a=?b"},
      {"/p%3Fnot-query", "/p?not-query", ""},
      {"/frag#part", "/frag", ""},
      {"/frag?x=1#part", "/frag", "x=1"},
      {"/frag#part?x=1", "/frag", ""},
      {"http://example.com/x/y?q=1", "/x/y", "q=1"},
      {"HTTP://example.com:8080/x", "/x", ""},
      {"https://example.com", "/", ""},
      {"http://example.com?z", "/", "z"},
      {"http://example.com/../x", "", ""},
      {"/..", "", ""},
      {"/../", "", ""},
      {"/a/../..", "", ""},
      {"/%2e%2e", "", ""},
      {"/%2E%2E/", "", ""},
      {"/%2e%2e%2fetc", "", ""},
      {"/a%00", "", ""},
      {"/a%0", "", ""},
      {"/%g0", "", ""},
  };
  for (const path_case& c : cases) {
    const std::string in = "GET " + std::string(c.target) + " HTTP/1.1\r\nHost: h\r\n\r\n";
    request r;
    const parse_result res = parse(in, r);
    if (c.path.empty()) {
      EXPECT_EQ(res.status, parse_status::error) << c.target;
      EXPECT_EQ(res.error_status, 400) << c.target;
      continue;
    }
    ASSERT_EQ(res.status, parse_status::complete) << c.target;
    EXPECT_EQ(r.path, c.path) << c.target;
    EXPECT_EQ(r.query, c.query) << c.target;
    EXPECT_EQ(r.target, c.target);
  }
}

TEST(HttpParser, OptionsAsterisk) {
  request r;
  ASSERT_EQ(parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", r).status, parse_status::complete);
  EXPECT_EQ(r.verb, method::options);
  EXPECT_EQ(r.path, "*");
  EXPECT_EQ(r.target, "*");
}

TEST(HttpParser, RawUtf8InTargetIsDecodedAsIs) {
  request r;
  ASSERT_EQ(parse("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", r).status,
            parse_status::complete);
  EXPECT_EQ(r.path, "/caf\xc3\xa9");
}

TEST(HttpTarget, ErrorKinds) {
  using spoold::http::parse_target;
  using spoold::http::target_status;
  std::string path;
  std::string_view query;
  EXPECT_EQ(parse_target("x", false, path, query), target_status::malformed);
  EXPECT_EQ(parse_target("", false, path, query), target_status::malformed);
  EXPECT_EQ(parse_target("*", false, path, query), target_status::malformed);
  EXPECT_EQ(parse_target("*", true, path, query), target_status::ok);
  EXPECT_EQ(parse_target("/%", false, path, query), target_status::bad_escape);
  EXPECT_EQ(parse_target("/%00", false, path, query), target_status::nul_byte);
  EXPECT_EQ(parse_target("/a/../..", false, path, query), target_status::climbs_above_root);
  // The query is not decoded, so an escape error there is the application's business.
  EXPECT_EQ(parse_target("/a?%zz", false, path, query), target_status::ok);
  EXPECT_EQ(query, "%zz");
}

TEST(HttpTarget, NormalizeInPlace) {
  std::string p = "/a//b/./c/../d/";
  ASSERT_TRUE(spoold::http::normalize_path(p));
  EXPECT_EQ(p, "/a/b/d/");
  p = "/";
  ASSERT_TRUE(spoold::http::normalize_path(p));
  EXPECT_EQ(p, "/");
  p = "/x/../../y";
  EXPECT_FALSE(spoold::http::normalize_path(p));
}

}  // namespace
