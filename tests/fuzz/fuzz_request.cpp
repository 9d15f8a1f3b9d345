// libFuzzer target for spoold's HTTP input handling: parse_request (server/http/parser.hpp) with
// both body framings (Content-Length, and the chunked decoder of body.hpp), percent_decode /
// parse_form / html_escape (form.hpp), parse_http_date and add_header (response.hpp), and the PROXY
// protocol header (proxy_header.hpp).
//
// README: `tests/fuzz/run.sh <build-dir>` builds this file with clang (-fsanitize=fuzzer,
// address,undefined) and runs it on a copy of tests/fuzz/corpus/ for SPOOLD_FUZZ_SECONDS
// (default 60); ctest runs it as spoold_fuzz_request in release builds. A crash leaves its input
// in <build-dir>/crash-*; reproduce with `<build-dir>/fuzz_request <that file>`.
//
// Beyond "no crash, no sanitizer report", each input is held to invariants that the parser's
// callers rely on; a violation aborts with the invariant's text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/form.hpp"
#include "http/parser.hpp"
#include "http/proxy_header.hpp"
#include "http/request.hpp"
#include "http/response.hpp"

namespace {

using spoold::http::limits;
using spoold::http::parse_result;
using spoold::http::parse_status;
using spoold::http::request;

[[noreturn]] void violated(const char* what, int line) {
  std::fprintf(stderr, "fuzz_request.cpp:%d: invariant violated: %s\n", line, what);
  std::abort();
}

#define CHECK(cond)                         \
  do {                                      \
    if (!(cond)) violated(#cond, __LINE__); \
  } while (0)

bool inside(std::string_view inner, std::string_view outer) {
  if (inner.empty()) return true;
  const auto in = reinterpret_cast<std::uintptr_t>(inner.data());
  const auto out = reinterpret_cast<std::uintptr_t>(outer.data());
  return in >= out && in + inner.size() <= out + outer.size();
}

bool is_tchar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_documented_error(int status) {
  switch (status) {
    case 400:
    case 413:
    case 414:
    case 431:
    case 501:
    case 505:
      return true;
    default:
      return false;
  }
}

void check_path(const request& req) {
  if (req.path == "*") {
    CHECK(req.verb == spoold::http::method::options);
    return;
  }
  const std::string_view p = req.path;
  CHECK(!p.empty() && p[0] == '/');
  CHECK(p.find('\0') == std::string_view::npos);
  CHECK(p.find("//") == std::string_view::npos);
  CHECK(p.find("/./") == std::string_view::npos);
  CHECK(p.find("/../") == std::string_view::npos);
  CHECK(!(p.size() >= 2 && p.substr(p.size() - 2) == "/."));
  CHECK(!(p.size() >= 3 && p.substr(p.size() - 3) == "/.."));
}

void check_headers(const request& req, std::string_view buf, const limits& lim) {
  CHECK(req.headers.size() <= lim.max_headers);
  for (const auto& h : req.headers) {
    CHECK(inside(h.name, buf) && inside(h.value, buf));
    CHECK(!h.name.empty());
    for (const char c : h.name) CHECK(is_tchar(c));
    for (const char c : h.value) {
      const auto u = static_cast<unsigned char>(c);
      CHECK(u == '\t' || (u >= 0x20 && u != 0x7f));
    }
    if (!h.value.empty()) {
      CHECK(h.value.front() != ' ' && h.value.front() != '\t');
      CHECK(h.value.back() != ' ' && h.value.back() != '\t');
    }
  }
}

void check_result(std::string_view buf, const limits& lim, const parse_result& r,
                  const request& req) {
  switch (r.status) {
    case parse_status::incomplete:
      CHECK(r.consumed == 0 && r.error_status == 0);
      if (r.needs_continue) CHECK(req.expect_continue && (req.content_length > 0 || req.chunked));
      // Parsing again helps only at a longer buffer (or, with awaits_line, at a line end).
      if (r.needed > 0) CHECK(r.needed > buf.size());
      if (r.awaits_line) CHECK(req.chunked && r.needed > 0);
      return;
    case parse_status::error:
      CHECK(is_documented_error(r.error_status));
      CHECK(!r.error_reason.empty());
      CHECK(r.consumed == 0 && !r.needs_continue);
      return;
    case parse_status::complete:
      break;
  }
  CHECK(r.consumed > 0 && r.consumed <= buf.size());
  CHECK(r.error_status == 0 && !r.needs_continue);
  const std::string_view used = buf.substr(0, r.consumed);
  CHECK(inside(req.method_text, used) && inside(req.target, used));
  CHECK(inside(req.query, req.target));
  CHECK(spoold::http::method_name(req.verb) == req.method_text);
  CHECK(req.version_minor == 0 || req.version_minor == 1);
  CHECK(req.body.size() == req.content_length && req.content_length <= lim.max_body);
  if (req.chunked) {
    // Decoded into the request's own storage; the request as sent stays within its bound, and
    // the framing costs at least "0" and two line ends.
    CHECK(inside(req.body, req.decoded_body) && req.body.size() == req.decoded_body.size());
    CHECK(req.version_minor == 1);
    CHECK(r.consumed <= lim.max_head + lim.max_body || lim.max_body > SIZE_MAX - lim.max_head);
    CHECK(r.consumed >= req.body.size() + 3);
    CHECK(req.find("content-length") == nullptr);
  } else {
    CHECK(inside(req.body, used));
    CHECK(req.body.data() + req.body.size() == buf.data() + r.consumed);  // the body ends it
    CHECK(r.consumed - req.body.size() <= lim.max_head + 16);             // + tolerated empty lines
  }
  if (req.version_minor == 1) CHECK(req.find("host") != nullptr);
  if (req.version_minor == 0) CHECK(!req.expect_continue);
  check_path(req);
  check_headers(req, used, lim);
}

bool same_request(const request& a, const request& b) {
  return a.verb == b.verb && a.path == b.path && a.query == b.query &&
         a.headers.size() == b.headers.size() && a.body == b.body && a.keep_alive == b.keep_alive &&
         a.content_length == b.content_length && a.chunked == b.chunked &&
         a.version_minor == b.version_minor;
}

// Parses `buf` whole, then prefixes of it, then (if complete) the requests pipelined after it.
void fuzz_parser(std::string_view buf, const limits& lim) {
  for (int pipelined = 0; pipelined < 8; ++pipelined) {
    request whole;
    const parse_result r = spoold::http::parse_request(buf, lim, whole);
    check_result(buf, lim, r, whole);

    // A prefix says "incomplete" or exactly what the whole says: a connection that parses after
    // every read sees the same outcome however the bytes were split.
    const std::size_t hash =
        buf.empty() ? 0 : static_cast<unsigned char>(buf[0]) * 131u + buf.size();
    const std::size_t splits[] = {buf.size() / 2, buf.empty() ? 0 : hash % buf.size(),
                                  buf.empty() ? 0 : buf.size() - 1};
    for (const std::size_t k : splits) {
      request part;
      const std::string_view prefix = buf.substr(0, k);
      const parse_result p = spoold::http::parse_request(prefix, lim, part);
      check_result(prefix, lim, p, part);
      if (p.status == parse_status::incomplete) continue;
      CHECK(p.status == r.status && p.error_status == r.error_status && p.consumed == r.consumed);
      if (p.status == parse_status::complete) CHECK(same_request(part, whole));
    }

    if (r.status != parse_status::complete) return;
    buf.remove_prefix(r.consumed);
  }
}

std::string percent_encode_all(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back('%');
    out.push_back(hex[u >> 4]);
    out.push_back(hex[u & 15]);
  }
  return out;
}

void fuzz_form(std::string_view buf) {
  for (const bool plus : {false, true}) {
    const auto decoded = spoold::http::percent_decode(buf, plus);
    if (buf.find('%') == std::string_view::npos) CHECK(decoded.has_value());
    if (!decoded) continue;
    CHECK(decoded->size() <= buf.size());
    const auto again = spoold::http::percent_decode(percent_encode_all(*decoded), plus);
    CHECK(again && *again == *decoded);
  }

  const auto form = spoold::http::parse_form(buf);
  if (buf.find('%') == std::string_view::npos) CHECK(form.has_value());
  if (form) {
    std::string rebuilt;
    for (const auto& [name, value] : *form) {
      if (!rebuilt.empty()) rebuilt.push_back('&');
      rebuilt += percent_encode_all(name) + "=" + percent_encode_all(value);
    }
    CHECK(spoold::http::parse_form(rebuilt) == form);
  }

  const std::string escaped = spoold::http::html_escape(buf);
  CHECK(escaped.find_first_of("<>\"'") == std::string::npos);
  CHECK(escaped.size() >= buf.size());
}

void fuzz_response_bits(std::string_view buf) {
  std::int64_t t = 0;
  if (buf.size() <= 40 && spoold::http::parse_http_date(buf, t)) {
    std::int64_t back = 0;
    CHECK(spoold::http::parse_http_date(spoold::http::http_date(t), back) && back == t);
  }
  // No header text can add a line: one CRLF, at the end.
  spoold::http::response r;
  r.add_header(buf, buf);
  CHECK(r.headers.find_first_of("\r\n") == r.headers.size() - 2);
}

void check_proxy_result(std::string_view buf, const spoold::http::proxy_header_result& r) {
  using spoold::http::proxy_error;
  using spoold::http::proxy_status;
  switch (r.status) {
    case proxy_status::incomplete:
      // Every byte passed is header, and a header never outgrows its limit.
      CHECK(r.error == proxy_error::none && !r.has_source && r.length == 0);
      CHECK(buf.size() < spoold::http::max_proxy_header);
      if (r.version == 1) CHECK(buf.size() < spoold::http::max_v1_header);
      return;
    case proxy_status::error:
      CHECK(r.error != proxy_error::none && !r.has_source);
      return;
    case proxy_status::complete:
      break;
  }
  CHECK(r.error == proxy_error::none);
  CHECK(r.length > 0 && r.length <= buf.size() && r.length <= spoold::http::max_proxy_header);
  CHECK(r.version == 1 || r.version == 2);
  if (r.version == 1) {
    CHECK(r.length <= spoold::http::max_v1_header);
    CHECK(buf.substr(0, 6) == "PROXY " && buf.substr(r.length - 2, 2) == "\r\n");
  }
}

// The PROXY header parser alone, then on prefixes: a prefix is incomplete or says exactly what
// the whole says, so a connection reading the header in pieces decides as one that read it whole.
void fuzz_proxy_header(std::string_view buf) {
  const auto whole = spoold::http::parse_proxy_header(buf);
  check_proxy_result(buf, whole);
  const std::size_t splits[] = {buf.size() / 2, buf.empty() ? 0 : buf.size() - 1, 16, 107};
  for (const std::size_t k : splits) {
    if (k > buf.size()) continue;
    const std::string_view prefix = buf.substr(0, k);
    const auto part = spoold::http::parse_proxy_header(prefix);
    check_proxy_result(prefix, part);
    if (part.status == spoold::http::proxy_status::incomplete) continue;
    CHECK(part.status == whole.status && part.error == whole.error && part.length == whole.length);
    CHECK(part.has_source == whole.has_source && part.source == whole.source);
  }
  // What follows a complete header is the first request, as the connection sees it.
  if (whole.status == spoold::http::proxy_status::complete) {
    fuzz_parser(buf.substr(whole.length), limits{});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view buf(reinterpret_cast<const char*>(data), size);

  fuzz_parser(buf, limits{});
  limits small;
  small.max_request_line = 64;
  small.max_head = 256;
  small.max_headers = 4;
  small.max_body = 128;
  fuzz_parser(buf, small);
  limits unbounded_body;
  unbounded_body.max_body = UINT64_MAX;  // Content-Length near 2^64 must not overflow offsets
  fuzz_parser(buf, unbounded_body);

  fuzz_form(buf);
  fuzz_response_bits(buf);
  fuzz_proxy_header(buf);
  return 0;
}
