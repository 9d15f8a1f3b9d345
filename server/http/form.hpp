// application/x-www-form-urlencoded bodies and percent-decoding.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spoold::http {

// Decodes %XX escapes (and '+' as space when plus_is_space). nullopt on a malformed escape.
std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space);

// The same, appending to `out` (whose capacity a caller may reuse); false on a malformed escape,
// with `out` then holding a partial result.
bool percent_decode_append(std::string_view in, bool plus_is_space, std::string& out);

// "a=1&b=two+words" -> {{"a","1"},{"b","two words"}}; nullopt if any part is malformed.
// Empty pieces ("a=1&&b=2", a trailing '&') are skipped; a piece without '=' is a name with an
// empty value.
std::optional<std::vector<std::pair<std::string, std::string>>> parse_form(std::string_view body);

// Escapes & < > " ' for HTML text and attribute values.
std::string html_escape(std::string_view in);

}  // namespace spoold::http
