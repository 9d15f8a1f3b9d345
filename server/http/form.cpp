#include "http/form.hpp"

namespace spoold::http {

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool percent_decode_append(std::string_view in, bool plus_is_space, std::string& out) {
  out.reserve(out.size() + in.size());
  std::size_t i = 0;
  while (i < in.size()) {
    // Copy the run up to the next byte that needs decoding in one append: most paths and form
    // fields are plain text, so this is the common case.
    std::size_t run = i;
    while (run < in.size() && in[run] != '%' && !(plus_is_space && in[run] == '+')) ++run;
    out.append(in.data() + i, run - i);
    i = run;
    if (i == in.size()) break;
    if (in[i] == '+') {
      out.push_back(' ');
      ++i;
      continue;
    }
    if (in.size() - i < 3) return false;  // '%' needs two hex digits after it
    const int hi = hex_value(in[i + 1]);
    const int lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 3;
  }
  return true;
}

std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space) {
  std::string out;
  if (!percent_decode_append(in, plus_is_space, out)) return std::nullopt;
  return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> parse_form(std::string_view body) {
  std::vector<std::pair<std::string, std::string>> fields;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t end = body.find('&', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view piece = body.substr(start, end - start);
    start = end + 1;
    if (piece.empty()) continue;
    const std::size_t eq = piece.find('=');
    std::pair<std::string, std::string> field;
    if (!percent_decode_append(piece.substr(0, eq), true, field.first)) return std::nullopt;
    if (eq != std::string_view::npos &&
        !percent_decode_append(piece.substr(eq + 1), true, field.second)) {
      return std::nullopt;
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

std::string html_escape(std::string_view in) {
  std::string out;
  out.reserve(in.size() + in.size() / 8);
  for (const char c : in) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
        break;
    }
  }
  return out;
}

}  // namespace spoold::http
