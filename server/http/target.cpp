#include "http/target.hpp"

#include <cstring>

#include "http/form.hpp"
#include "http/request.hpp"

namespace spoold::http {

namespace {

// "http://host/p" and "https://host/p" -> "/p" ("" when the target has no path); false for
// anything else that does not start with '/'.
bool absolute_form_path(std::string_view target, std::string_view& path_and_query) {
  std::size_t after_scheme = 0;
  if (target.size() >= 7 && ascii_iequals(target.substr(0, 7), "http://")) {
    after_scheme = 7;
  } else if (target.size() >= 8 && ascii_iequals(target.substr(0, 8), "https://")) {
    after_scheme = 8;
  } else {
    return false;
  }
  const std::size_t authority_end = target.find_first_of("/?#", after_scheme);
  if (authority_end == after_scheme) return false;  // no host: "http:///p"
  path_and_query =
      authority_end == std::string_view::npos ? std::string_view{} : target.substr(authority_end);
  return true;
}

}  // namespace

target_status parse_target(std::string_view target, bool is_options, std::string& path,
                           std::string_view& query) {
  path.clear();
  query = {};
  if (target == "*") {
    if (!is_options) return target_status::malformed;
    path = "*";
    return target_status::ok;
  }
  std::string_view rest = target;
  if (target.empty() || (target[0] != '/' && !absolute_form_path(target, rest))) {
    return target_status::malformed;
  }
  // Browsers never send a fragment, but a hand-written client might; it is not part of the
  // resource.
  if (const std::size_t hash = rest.find('#'); hash != std::string_view::npos) {
    rest = rest.substr(0, hash);
  }
  std::string_view raw_path = rest;
  if (const std::size_t question = rest.find('?'); question != std::string_view::npos) {
    raw_path = rest.substr(0, question);
    query = rest.substr(question + 1);
  }
  if (raw_path.empty()) {
    path = "/";  // absolute form without a path: "http://host" or "http://host?q"
    return target_status::ok;
  }
  if (!percent_decode_append(raw_path, false, path)) return target_status::bad_escape;
  if (path.find('\0') != std::string::npos) return target_status::nul_byte;
  if (!normalize_path(path)) return target_status::climbs_above_root;
  return target_status::ok;
}

bool normalize_path(std::string& path) noexcept {
  // One pass with a read index r and a write index w <= r: the output is built over the input.
  // Invariant: path[0, w) is normalised, starts with '/', and ends with '/' unless its last
  // segment was the final one of the input.
  char* const p = path.data();
  const std::size_t n = path.size();
  std::size_t w = 1;
  std::size_t r = 1;
  while (r < n) {
    if (p[r] == '/') {  // collapse "//"
      ++r;
      continue;
    }
    std::size_t end = r;
    while (end < n && p[end] != '/') ++end;
    const std::size_t length = end - r;
    const bool slash_follows = end < n;
    if (length == 1 && p[r] == '.') {
      // "/a/." and "/a/./" both name "/a/"; the output already ends with '/'.
    } else if (length == 2 && p[r] == '.' && p[r + 1] == '.') {
      if (w == 1) return false;
      --w;  // drop the '/' that ends the previous segment, then the segment itself
      while (p[w - 1] != '/') --w;
    } else {
      std::memmove(p + w, p + r, length);
      w += length;
      if (slash_follows) p[w++] = '/';
    }
    r = end + 1;
  }
  path.resize(w);
  return true;
}

}  // namespace spoold::http
