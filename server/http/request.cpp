#include "http/request.hpp"

#include <iterator>

namespace spoold::http {

namespace {

constexpr unsigned char ascii_lower(unsigned char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c + ('a' - 'A')) : c;
}

// Indexed by `method`, in its order; the most frequent first, since find_method looks in order.
constexpr std::string_view method_names[] = {"GET",     "HEAD",  "POST",  "PUT",    "DELETE",
                                             "OPTIONS", "PATCH", "TRACE", "CONNECT"};
static_assert(std::size(method_names) == static_cast<std::size_t>(method::connect) + 1);

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
  chunked = false;
  content_length = 0;
  headers.clear();
  body = {};
  decoded_body.clear();
}

std::string_view method_name(method m) noexcept {
  const auto i = static_cast<std::size_t>(m);
  return i < std::size(method_names) ? method_names[i] : "UNKNOWN";
}

std::optional<method> find_method(std::string_view name) noexcept {
  for (std::size_t i = 0; i < std::size(method_names); ++i) {
    if (method_names[i] == name) return static_cast<method>(i);
  }
  return std::nullopt;
}

}  // namespace spoold::http
