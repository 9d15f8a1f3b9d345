#include "app/guestbook.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "http/form.hpp"

namespace spoold {
namespace {

constexpr std::string_view form_type = "application/x-www-form-urlencoded";

bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// "application/x-www-form-urlencoded; charset=utf-8" -> true. Parameters are not checked:
// browsers send this type without one, and the body is decoded as UTF-8 whatever it says.
bool is_form_type(std::string_view content_type) noexcept {
  const std::size_t semicolon = content_type.find(';');
  return equals_ignoring_case(trim(content_type.substr(0, semicolon)), form_type);
}

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    std::size_t length;
    unsigned char lo = 0x80;  // the range of the second byte, which rules out overlongs,
    unsigned char hi = 0xbf;  // surrogates and code points past U+10FFFF
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      length = 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      length = 3;
      if (b0 == 0xe0) lo = 0xa0;
      if (b0 == 0xed) hi = 0x9f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      length = 4;
      if (b0 == 0xf0) lo = 0x90;
      if (b0 == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (s.size() - i < length) return false;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b1 < lo || b1 > hi) return false;
    for (std::size_t k = 2; k < length; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < 0x80 || b > 0xbf) return false;
    }
    i += length;
  }
  return true;
}

bool is_control(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

// Names are one line (the Redis store depends on it: see store.hpp); remarks may have tabs and
// line breaks.
bool clean_name(std::string_view s) noexcept {
  for (char c : s) {
    if (is_control(c)) return false;
  }
  return is_utf8(s);
}

bool clean_remarks(std::string_view s) noexcept {
  for (char c : s) {
    if (is_control(c) && c != '\n' && c != '\t') return false;
  }
  return is_utf8(s);
}

// CR LF and lone CR -> LF: browsers send a textarea's line breaks as CR LF.
std::string normalise_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Escaped text with each line break (LF, CR LF or CR) shown as <br>.
std::string escape_lines(std::string_view text) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    out += http::html_escape(text.substr(start, i - start));
    out += "<br>\n";
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  out += http::html_escape(text.substr(start));
  return out;
}

void append_head(std::string& out, std::string_view title) {
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>";
  out += title;
  out += "</title>\n<link rel=\"stylesheet\" href=\"/style.css\">\n</head>\n<body>\n";
}

void append_nav(std::string& out) {
  out +=
      "<nav><a href=\"/\">Home</a> | <a href=\"/guestbook\">Guestbook</a> | "
      "<a href=\"/dashboard\">Dashboard</a></nav>\n";
}

void append_entry(std::string& out, const store::entry& e) {
  out += "<li class=\"entry\"><span class=\"name\">";
  // ZeroHTTPd stores remarks without a name.
  out += e.name.empty() ? std::string("anonymous") : http::html_escape(e.name);
  out += "</span><p class=\"remarks\">";
  out += escape_lines(e.remarks);
  out += "</p></li>\n";
}

void append_form(std::string& out, const guestbook_limits& limits, std::string_view post_key) {
  out += "<form id=\"guestbook-form\" method=\"post\" action=\"/guestbook\">\n";
  if (!post_key.empty()) {
    out += "<input type=\"hidden\" name=\"post-key\" id=\"post-key\" value=\"";
    out += http::html_escape(post_key);
    out += "\">\n";
  }
  out += "<p><label for=\"guest-name\">Your name</label>\n";
  out += "<input type=\"text\" name=\"guest-name\" id=\"guest-name\" maxlength=\"" +
         std::to_string(limits.max_name) + "\" required autocomplete=\"name\"></p>\n";
  out += "<p><label for=\"guest-remarks\">Your remarks</label>\n";
  out += "<textarea name=\"guest-remarks\" id=\"guest-remarks\" maxlength=\"" +
         std::to_string(limits.max_remarks) +
         "\" rows=\"5\" cols=\"60\" required></textarea></p>\n";
  out += "<p><button type=\"submit\" id=\"guest-submit\">Sign the guestbook</button></p>\n";
  out += "</form>\n";
}

// "served by" at the foot of a page, when the server has a node name.
void append_foot(std::string& out, std::string_view node) {
  if (node.empty()) return;
  out += "<footer>served by <span id=\"node-name\">";
  out += http::html_escape(node);
  out += "</span></footer>\n";
}

bool is_post_key_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

bool valid_post_key(std::string_view key) noexcept {
  if (key.size() > max_post_key) return false;
  for (char c : key) {
    if (!is_post_key_char(c)) return false;
  }
  return true;
}

}  // namespace

std::string new_post_key() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      break;  // no getrandom (ENOSYS): std::random_device below
    }
  }
  if (got < sizeof bytes) {
    std::random_device device;
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(device());
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string key;
  key.reserve(2 * sizeof bytes);
  for (unsigned char b : bytes) {
    key += hex[b >> 4];
    key += hex[b & 15];
  }
  return key;
}

std::string_view describe(form_error e) noexcept {
  switch (e) {
    case form_error::none:
      return "";
    case form_error::not_a_form:
      return "The request body is not an HTML form (application/x-www-form-urlencoded).";
    case form_error::missing_name:
      return "Please enter your name.";
    case form_error::missing_remarks:
      return "Please enter your remarks.";
    case form_error::name_too_long:
      return "Your name is too long.";
    case form_error::remarks_too_long:
      return "Your remarks are too long.";
    case form_error::bad_characters:
      return "The form contains characters that are not allowed (control characters or "
             "invalid UTF-8).";
    case form_error::bad_post_key:
      return "The form's post key is malformed (at most 64 letters, digits, '-' or '_'). "
             "Reload the guestbook and post again.";
  }
  return "Unknown form error.";
}

form_error parse_guestbook_form(std::string_view content_type, std::string_view body,
                                const guestbook_limits& limits, guestbook_post& out) {
  if (!is_form_type(content_type)) return form_error::not_a_form;
  const auto fields = http::parse_form(body);
  if (!fields) return form_error::bad_characters;  // a malformed %XX escape

  std::optional<std::string_view> name_field;
  std::optional<std::string_view> remarks_field;
  std::optional<std::string_view> key_field;
  for (const auto& [key, value] : *fields) {
    if (key == "guest-name" && !name_field) name_field = value;
    if (key == "guest-remarks" && !remarks_field) remarks_field = value;
    if (key == "post-key" && !key_field) key_field = value;
  }

  const std::string_view name = trim(name_field.value_or(""));
  if (name.empty()) return form_error::missing_name;
  if (name.size() > limits.max_name) return form_error::name_too_long;
  if (!clean_name(name)) return form_error::bad_characters;

  const std::string remarks = normalise_newlines(trim(remarks_field.value_or("")));
  if (remarks.empty()) return form_error::missing_remarks;
  if (remarks.size() > limits.max_remarks) return form_error::remarks_too_long;
  if (!clean_remarks(remarks)) return form_error::bad_characters;

  const std::string_view post_key = key_field.value_or("");
  if (!valid_post_key(post_key)) return form_error::bad_post_key;

  out.entry.name = std::string(name);
  out.entry.remarks = remarks;
  out.key = std::string(post_key);
  return form_error::none;
}

form_error parse_guestbook_form(std::string_view content_type, std::string_view body,
                                const guestbook_limits& limits, store::entry& out) {
  guestbook_post post;
  const form_error e = parse_guestbook_form(content_type, body, limits, post);
  if (e == form_error::none) out = std::move(post.entry);
  return e;
}

std::string render_guestbook_page(const store::page& p, std::string_view notice,
                                  const guestbook_limits& limits, const page_extras& extras) {
  std::string out;
  out.reserve(2048 + p.entries.size() * 256);
  append_head(out, "Guestbook");
  append_nav(out);
  out += "<main>\n<h1>Guestbook</h1>\n";
  out += "<p>You are visitor number <strong id=\"visitor-count\">" +
         std::to_string(p.visitor_count) + "</strong>.</p>\n";
  if (!notice.empty()) {
    out += "<p id=\"notice\" role=\"alert\">" + http::html_escape(notice) + "</p>\n";
  }
  append_form(out, limits, extras.post_key);
  out += "<h2>Entries</h2>\n";
  out += "<p id=\"entry-total\">" + std::to_string(p.total_entries) +
         (p.total_entries == 1 ? " entry" : " entries");
  if (p.entries.size() < p.total_entries) {
    out += ", the latest " + std::to_string(p.entries.size()) + " shown";
  }
  // Numbered as entries of the whole book: the first shown is number total - shown + 1.
  const std::uint64_t first =
      p.total_entries >= p.entries.size() ? p.total_entries - p.entries.size() + 1 : 1;
  out += ".</p>\n<ol id=\"entries\" start=\"" + std::to_string(first) + "\">\n";
  for (const store::entry& e : p.entries) append_entry(out, e);
  out += "</ol>\n</main>\n";
  append_foot(out, extras.node);
  out += "</body>\n</html>\n";
  return out;
}

std::string render_store_down_page(std::string_view detail, const store_trouble& trouble) {
  std::string out;
  append_head(out, "Guestbook unavailable");
  append_nav(out);
  out += "<main>\n<h1>503 Service Unavailable</h1>\n";
  switch (trouble.what) {
    case store_trouble::kind::unavailable:
      out +=
          "<p>The guestbook store is unavailable right now. Please try again in a few "
          "seconds.</p>\n";
      break;
    case store_trouble::kind::no_primary:
      out +=
          "<p>The guestbook store has no primary right now (a failover may be under way), "
          "so nothing was read or stored. Please try again in a few seconds.</p>\n";
      break;
    case store_trouble::kind::busy:
      out +=
          "<p>The guestbook is too busy right now: its store had no free connection in time, "
          "so nothing was read or stored. Please try again in a few seconds.</p>\n";
      break;
    case store_trouble::kind::outcome_unknown:
      out +=
          "<p id=\"outcome\">Your entry <strong>may or may not have been stored</strong>: "
          "it reached the store, but the confirmation that it is safely kept did not come "
          "in time.</p>\n";
      out += trouble.post_had_key
                 ? "<p>Sending the form again is safe: the guestbook recognises a post it "
                   "already has and will not store it twice.</p>\n"
                 : "<p>Please look at the guestbook before you post it again, or it may appear "
                   "twice.</p>\n";
      break;
  }
  if (!detail.empty()) out += "<p id=\"detail\">" + http::html_escape(detail) + "</p>\n";
  out += "</main>\n";
  append_foot(out, trouble.node);
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace spoold
