#pragma once

#include <string_view>

namespace spoold::http {

// The Content-Type for a file name, by its extension (case-insensitive); text types carry
// "; charset=utf-8". Unknown extensions: "application/octet-stream".
std::string_view mime_type(std::string_view file_name) noexcept;

}  // namespace spoold::http
