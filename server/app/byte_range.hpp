// The Range header of a GET (RFC 9110 section 14): one "bytes" range against a file's size.
#pragma once

#include <cstdint>
#include <string_view>

namespace spoold {

struct byte_range {
  enum kind_t : std::uint8_t {
    whole,          // no Range, a malformed one, or several ranges: send the whole file (200)
    partial,        // send [first, first + length) with 206
    unsatisfiable,  // 416 with "Content-Range: bytes */size"
  };
  kind_t kind = whole;
  std::uint64_t first = 0;
  std::uint64_t length = 0;
};

// "bytes=a-b", "bytes=a-" and "bytes=-n" (the last n bytes). The unit is case-insensitive and
// spaces around the range are allowed. Several ranges are answered with the whole file rather
// than multipart/byteranges, which the RFC permits and which no browser needs.
byte_range parse_range(std::string_view header, std::uint64_t size) noexcept;

}  // namespace spoold
