// The request-target of a request line: which path it names and what query it carries.
//
// Used by parse_request; declared apart so that the path rules (which decide what a static
// file request may reach) can be read and tested on their own.
#pragma once

#include <string>
#include <string_view>

namespace spoold::http {

enum class target_status {
  ok,
  malformed,          // not "/...", "http(s)://authority[/...]" or (for OPTIONS) "*"
  bad_escape,         // '%' not followed by two hex digits
  nul_byte,           // "%00" in the path
  climbs_above_root,  // a ".." segment with nothing left to remove, e.g. "/a/../.."
};

// Splits `target` at the first '?' (the query, kept raw) after dropping a "#fragment", then
// percent-decodes the path into `path` and normalises it with normalize_path. The absolute form
// "http://host/p?q" contributes its path ("/" when it has none); "*" is accepted only when
// `is_options` and gives the path "*". Decoding happens before normalising, so "%2F" separates
// segments and "%2e%2e" is a ".." segment: the path that comes out is the one a file lookup
// will walk, whatever spelling the client used.
target_status parse_target(std::string_view target, bool is_options, std::string& path,
                           std::string_view& query);

// In place, on a path that starts with '/': collapses runs of '/', drops "." segments and
// resolves ".." against the segment before it, keeping a trailing slash ("/a/b/.." -> "/a/",
// "/dir/" stays "/dir/"). false when a ".." would climb above '/', which the server answers
// with 400 rather than silently clamping to '/': such a request is a traversal attempt or a
// broken client, and either deserves to be told.
bool normalize_path(std::string& path) noexcept;

}  // namespace spoold::http
