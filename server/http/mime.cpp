#include "http/mime.hpp"

#include "http/request.hpp"

namespace spoold::http {

namespace {

struct mime_entry {
  std::string_view extension;
  std::string_view type;
};

// Only text/* types carry a charset: for the others (JSON, SVG, XML) the encoding is part of
// the format itself.
constexpr mime_entry mime_table[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"txt", "text/plain; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"ico", "image/x-icon"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
};

constexpr std::string_view octet_stream = "application/octet-stream";

}  // namespace

std::string_view mime_type(std::string_view file_name) noexcept {
  const std::size_t slash = file_name.rfind('/');
  if (slash != std::string_view::npos) file_name.remove_prefix(slash + 1);
  const std::size_t dot = file_name.rfind('.');
  // No extension, or a dot-file such as ".htaccess" whose whole name is not an extension.
  if (dot == std::string_view::npos || dot == 0) return octet_stream;
  const std::string_view extension = file_name.substr(dot + 1);
  for (const mime_entry& e : mime_table) {
    if (ascii_iequals(e.extension, extension)) return e.type;
  }
  return octet_stream;
}

}  // namespace spoold::http
