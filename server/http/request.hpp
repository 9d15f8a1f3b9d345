// A parsed HTTP/1.x request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spoold::http {

enum class method : std::uint8_t { get, head, post, put, del, options, patch, trace, connect };

struct header {
  std::string_view name;
  std::string_view value;  // leading and trailing spaces/tabs removed
};

// Every string_view points into the buffer given to parse_request and stays valid until that
// buffer changes. `path` is owned: it is the decoded, normalised form of the target's path. A
// chunked body is owned too, decoded into `decoded_body`, which `body` then views: a copied
// request's `body` still views the original's.
struct request {
  method verb = method::get;
  std::string_view method_text;  // as sent ("GET")
  std::string_view target;       // as sent: path plus '?' query
  std::string path;              // percent-decoded, dot-segments resolved, starts with '/'
                                 // (the one exception: "*" for "OPTIONS * HTTP/1.1")
  std::string_view query;        // after the first '?', not decoded ("" when none)
  int version_minor = 1;         // 0 or 1: HTTP/1.0, or HTTP/1.1 (and later 1.x, answered as 1.1)
  bool keep_alive = true;        // 1.1 unless "Connection: close"; 1.0 only with "keep-alive"
  bool expect_continue = false;  // "Expect: 100-continue"
  bool chunked = false;          // "Transfer-Encoding: chunked"; the body is decoded_body
  std::uint64_t content_length = 0;  // the body's length (decoded, for a chunked body)
  std::vector<header> headers;
  std::string_view body;     // content_length bytes: in the parsed buffer, or decoded_body
  std::string decoded_body;  // a chunked body without its framing

  // The first header with this name, compared case-insensitively; nullptr when absent.
  [[nodiscard]] const header* find(std::string_view name) const noexcept;

  void clear() noexcept;  // ready for reuse; keeps the vectors' capacity
};

std::string_view method_name(method m) noexcept;
// The method a request line names (case-sensitive: "GET", not "get"); nullopt if unknown.
std::optional<method> find_method(std::string_view name) noexcept;

// ASCII case-insensitive equality (header names, tokens such as "close"); no locale.
bool ascii_iequals(std::string_view a, std::string_view b) noexcept;

}  // namespace spoold::http
