// Byte classes and small syntax checks of HTTP/1.1 (RFC 9110, 9112) shared by the request
// parser (parser.cpp) and the body decoder (body.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace spoold::http::syntax {

enum : std::uint8_t {
  token_char = 1,     // tchar (RFC 9110, 5.6.2): method, header-name and coding bytes
  value_char = 2,     // field-value bytes: HTAB, SP, VCHAR, obs-text (no CTL, no DEL)
  target_char = 4,    // request-target bytes: no CTL, SP or DEL (raw UTF-8 is let through)
  reg_name_char = 8,  // RFC 3986 reg-name bytes: unreserved and sub-delims ('%' apart)
};

inline constexpr std::array<std::uint8_t, 256> char_classes = [] {
  std::array<std::uint8_t, 256> table{};
  constexpr std::string_view token_punctuation = "!#$%&'*+-.^_`|~";
  constexpr std::string_view reg_name_punctuation = "-._~!$&'()*+,;=";
  for (int c = 0; c < 256; ++c) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const auto ch = static_cast<char>(c);
    std::uint8_t flags = 0;
    if (alnum || (c < 128 && token_punctuation.find(ch) != std::string_view::npos)) {
      flags |= token_char;
    }
    if (c == '\t' || (c >= 0x20 && c != 0x7f)) flags |= value_char;
    if (c > 0x20 && c != 0x7f) flags |= target_char;
    if (alnum || (c < 128 && reg_name_punctuation.find(ch) != std::string_view::npos)) {
      flags |= reg_name_char;
    }
    table[static_cast<std::size_t>(c)] = flags;
  }
  return table;
}();

inline bool has_class(char c, std::uint8_t cls) noexcept {
  return (char_classes[static_cast<unsigned char>(c)] & cls) != 0;
}

inline bool is_token(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (const char c : s) {
    if (!has_class(c, token_char)) return false;
  }
  return true;
}

inline bool is_hex_digit(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

inline std::string_view trim_spaces(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// True when every byte of `s` is a field-value byte. Header values are most of a request head,
// so they are checked eight bytes at a time: a word with no byte below 0x20 and none equal to
// 0x7f is clean. The two word tests ("has a byte less than n", "has a zero byte") are exact
// about whether such a byte exists, though not about where; a flagged word is looked at byte
// by byte, since its byte below 0x20 may be an allowed tab.
inline bool is_field_value(std::string_view s) noexcept {
  constexpr std::uint64_t ones = 0x0101010101010101ULL;
  constexpr std::uint64_t high_bits = 0x8080808080808080ULL;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, s.data() + i, 8);
    const std::uint64_t below_space = (word - ones * 0x20) & ~word & high_bits;
    const std::uint64_t xor_del = word ^ (ones * 0x7f);
    const std::uint64_t is_del = (xor_del - ones) & ~xor_del & high_bits;
    if ((below_space | is_del) == 0) continue;
    for (std::size_t j = i; j < i + 8; ++j) {
      if (!has_class(s[j], value_char)) return false;
    }
  }
  for (; i < s.size(); ++i) {
    if (!has_class(s[i], value_char)) return false;
  }
  return true;
}

// True when a CR at an index in [from, to) of `buf` is followed by a byte other than LF: a bare
// CR used as a line end (RFC 9112, 2.2), which is refused at once rather than waited out. A CR
// that is the last byte of `buf` may still be followed by its LF, so it does not count yet.
inline bool has_bare_cr(std::string_view buf, std::size_t from, std::size_t to) noexcept {
  to = to < buf.size() ? to : buf.size();
  while (from < to) {
    const void* cr = std::memchr(buf.data() + from, '\r', to - from);
    if (cr == nullptr) return false;
    const auto i = static_cast<std::size_t>(static_cast<const char*>(cr) - buf.data());
    if (i + 1 < buf.size() && buf[i + 1] != '\n') return true;
    from = i + 1;
  }
  return false;
}

// "name: value" (without its line end) split at the colon, the name a token directly before it
// and the value of field-value bytes, trimmed; nullptr when well formed, else why not.
inline const char* split_field_line(std::string_view line, std::string_view& name,
                                    std::string_view& value) noexcept {
  if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) {
    return "obsolete header line folding";  // RFC 9112, 5.2: reject or replace
  }
  std::size_t colon = 0;
  while (colon < line.size() && has_class(line[colon], token_char)) ++colon;
  if (colon == 0 || colon == line.size() || line[colon] != ':') return "malformed header name";
  value = line.substr(colon + 1);
  if (!is_field_value(value)) return "control character in a header value";
  name = line.substr(0, colon);
  value = trim_spaces(value);
  return nullptr;
}

}  // namespace spoold::http::syntax
