#include "functions.hpp"

#include <cstdint>
#include <cstdio>
#include <string_view>

namespace spool::queue::detail {

// functions.lua, embedded at build time (CMake writes functions_source.cpp).
extern const std::string_view functions_source;

namespace {

std::string fnv1a_hex(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

functions_library build() {
  functions_library lib;
  lib.version = fnv1a_hex(functions_source);
  lib.code = std::string(functions_source);
  constexpr std::string_view placeholder = "@VERSION@";
  if (const std::size_t at = lib.code.find(placeholder); at != std::string::npos) {
    lib.code.replace(at, placeholder.size(), lib.version);
  }
  return lib;
}

}  // namespace

const functions_library& functions() {
  static const functions_library lib = build();
  return lib;
}

}  // namespace spool::queue::detail
