// The guestbook's form and pages: what a POST /guestbook may contain, and the HTML of the page
// and of its 503. The store calls and the HTTP answers are app.cpp's.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "store/store.hpp"

namespace spoold {

struct guestbook_limits {
  std::size_t max_name = 64;       // bytes of UTF-8, after trimming
  std::size_t max_remarks = 1024;  // bytes of UTF-8, after trimming and newline normalisation
  std::size_t max_entries_shown = 100;
};

enum class form_error {
  none,
  not_a_form,       // Content-Type is not application/x-www-form-urlencoded (415)
  missing_name,     // absent, or only whitespace
  missing_remarks,  // absent, or only whitespace
  name_too_long,
  remarks_too_long,
  // Invalid UTF-8, a control character (in names any; in remarks any but tab and newlines),
  // or a body that is not valid form encoding (a bad %XX escape).
  bad_characters,
};

// A sentence for the user, e.g. "Please enter your name." ("" for none).
std::string_view describe(form_error e) noexcept;

// Reads the guest-name and guest-remarks fields of a form body (the first of each, if
// repeated; other fields are ignored). Both are trimmed of surrounding whitespace, and line
// breaks in the remarks (CR LF, CR) become LF. `out` is written only on success.
form_error parse_guestbook_form(std::string_view content_type, std::string_view body,
                                const guestbook_limits& limits, store::entry& out);

// The complete guestbook page: the visitor counter (#visitor-count), the entries oldest first
// (ol#entries > li.entry > span.name + p.remarks), an optional notice (#notice, e.g. why the
// last post was refused) and the form (#guestbook-form). Everything from users is escaped.
// The form's maxlength attributes come from `limits`.
std::string render_guestbook_page(const store::page& p, std::string_view notice = {},
                                  const guestbook_limits& limits = {});

// The body of the 503 answered when the store is unavailable; `detail` is shown escaped.
std::string render_store_down_page(std::string_view detail);

}  // namespace spoold
