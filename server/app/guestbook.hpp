// The guestbook's form and pages: what a POST /guestbook may contain, and the HTML of the page
// and of its 503s. The store calls and the HTTP answers are app.cpp's.
//
// Post keys. Every page carries a fresh random key in a hidden field of its form (post-key),
// and the store keeps it with the entry (store.hpp), so the same form sent twice -- a retry
// after a 503 or a timeout, a reload of the answer, a balancer or a client replaying it -- is
// stored once. A post without the field (ZeroHTTPd's form, curl) is stored as before, each
// time it is sent.
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
  // A post-key field that is not 1 to 64 letters, digits, '-' or '_'.
  bad_post_key,
};

// A valid form: the entry, and its post key ("" when the form had none, or an empty one).
struct guestbook_post {
  store::entry entry;
  std::string key;
};

inline constexpr std::size_t max_post_key = 64;

// A sentence for the user, e.g. "Please enter your name." ("" for none).
std::string_view describe(form_error e) noexcept;

// Reads the guest-name, guest-remarks and post-key fields of a form body (the first of each,
// if repeated; other fields are ignored). Name and remarks are trimmed of surrounding
// whitespace, and line breaks in the remarks (CR LF, CR) become LF. `out` is written only on
// success.
form_error parse_guestbook_form(std::string_view content_type, std::string_view body,
                                const guestbook_limits& limits, guestbook_post& out);
// The same, for callers that want the entry alone.
form_error parse_guestbook_form(std::string_view content_type, std::string_view body,
                                const guestbook_limits& limits, store::entry& out);

// A fresh post key: 128 bits from the kernel's random source, as 32 hex digits. Unique across
// threads, processes (forked ones too) and nodes.
std::string new_post_key();

// What a page shows besides the store's data.
struct page_extras {
  std::string_view node;      // --node-name ("" for none): "served by" at the foot of the page
  std::string_view post_key;  // the form's hidden post-key field ("" for none)
};

// The complete guestbook page: the visitor counter (#visitor-count), the entries oldest first
// (ol#entries > li.entry > span.name + p.remarks), an optional notice (#notice, e.g. why the
// last post was refused), the form (#guestbook-form, with its post key) and the node that
// answered (#node-name). Everything from users is escaped. The form's maxlength attributes
// come from `limits`.
std::string render_guestbook_page(const store::page& p, std::string_view notice = {},
                                  const guestbook_limits& limits = {},
                                  const page_extras& extras = {});

// Why the store could not do what a request asked, for the 503's page.
struct store_trouble {
  enum class kind {
    unavailable,      // the store is down: nothing was read or written
    no_primary,       // Redis Sentinel knows no primary (a failover may be under way)
    outcome_unknown,  // a post reached the store without confirmation that it is durable
    busy,             // every store connection was in use: nothing was read or written
  };
  kind what = kind::unavailable;
  bool post_had_key = false;  // outcome_unknown: sending the form again cannot store it twice
  std::string_view node;      // as in page_extras
};

// The body of the 503 answered when the store failed; `detail` is shown escaped.
std::string render_store_down_page(std::string_view detail, const store_trouble& trouble = {});

}  // namespace spoold
