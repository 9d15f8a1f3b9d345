#include "app/byte_range.hpp"

#include <limits>
#include <optional>

namespace spoold {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Digits only; nullopt when empty, not a number or past 2^64-1.
std::optional<std::uint64_t> parse_u64(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

bool starts_with_bytes_unit(std::string_view s) {
  constexpr std::string_view unit = "bytes=";
  if (s.size() < unit.size()) return false;
  for (std::size_t i = 0; i < unit.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != unit[i]) return false;
  }
  return true;
}

}  // namespace

byte_range parse_range(std::string_view header, std::uint64_t size) noexcept {
  byte_range whole;  // kind == whole
  header = trim(header);
  if (!starts_with_bytes_unit(header)) return whole;
  std::string_view set = header.substr(6);

  // Exactly one non-empty element (the grammar allows empty list elements around commas).
  std::string_view spec;
  int elements = 0;
  while (true) {
    std::size_t comma = set.find(',');
    std::string_view element = trim(set.substr(0, comma));
    if (!element.empty()) {
      ++elements;
      spec = element;
    }
    if (comma == std::string_view::npos) break;
    set.remove_prefix(comma + 1);
  }
  if (elements != 1) return whole;

  std::size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return whole;
  std::string_view first_text = spec.substr(0, dash);
  std::string_view last_text = spec.substr(dash + 1);

  byte_range out;
  if (first_text.empty()) {  // suffix: the last n bytes
    auto n = parse_u64(last_text);
    if (!n) return whole;
    if (*n == 0 || size == 0) {
      out.kind = byte_range::unsatisfiable;
      return out;
    }
    out.kind = byte_range::partial;
    out.length = *n < size ? *n : size;
    out.first = size - out.length;
    return out;
  }
  auto first = parse_u64(first_text);
  if (!first) return whole;
  std::uint64_t last = size == 0 ? 0 : size - 1;
  if (!last_text.empty()) {
    auto given = parse_u64(last_text);
    if (!given || *given < *first) return whole;  // invalid: the header is ignored
    if (*given < last) last = *given;
  }
  if (*first >= size) {
    out.kind = byte_range::unsatisfiable;
    return out;
  }
  out.kind = byte_range::partial;
  out.first = *first;
  out.length = last - *first + 1;
  return out;
}

}  // namespace spoold
