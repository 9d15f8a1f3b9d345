#include "http/request.hpp"

namespace spoold::http {

namespace {

constexpr unsigned char ascii_lower(unsigned char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c + ('a' - 'A')) : c;
}

}  // namespace

bool ascii_iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(static_cast<unsigned char>(a[i])) !=
        ascii_lower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

const header* request::find(std::string_view name) const noexcept {
  for (const header& h : headers) {
    if (ascii_iequals(h.name, name)) return &h;
  }
  return nullptr;
}

void request::clear() noexcept {
  verb = method::get;
  method_text = {};
  target = {};
  path.clear();
  query = {};
  version_minor = 1;
  keep_alive = true;
  expect_continue = false;
  content_length = 0;
  headers.clear();
  body = {};
}

std::string_view method_name(method m) noexcept {
  switch (m) {
    case method::get:
      return "GET";
    case method::head:
      return "HEAD";
    case method::post:
      return "POST";
    case method::put:
      return "PUT";
    case method::del:
      return "DELETE";
    case method::options:
      return "OPTIONS";
    case method::patch:
      return "PATCH";
    case method::trace:
      return "TRACE";
    case method::connect:
      return "CONNECT";
  }
  return "UNKNOWN";
}

}  // namespace spoold::http
