// The guestbook's form rules and its HTML.
#include "app/guestbook.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

namespace {

using spoold::describe;
using spoold::form_error;
using spoold::guestbook_limits;
using spoold::parse_guestbook_form;
using spoold::render_guestbook_page;
using spoold::render_store_down_page;
using spoold::store::entry;
using spoold::store::page;

constexpr std::string_view form_type = "application/x-www-form-urlencoded";

form_error parse(std::string_view body, entry* out = nullptr,
                 std::string_view content_type = form_type) {
  entry scratch;
  return parse_guestbook_form(content_type, body, guestbook_limits{}, out ? *out : scratch);
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

std::size_t count_of(const std::string& haystack, std::string_view needle) {
  std::size_t n = 0;
  for (std::size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Form parsing

TEST(GuestbookForm, AcceptsAValidForm) {
  entry e;
  EXPECT_EQ(parse("guest-name=Ann+Lee&guest-remarks=Hello%2C+world%21", &e), form_error::none);
  EXPECT_EQ(e.name, "Ann Lee");
  EXPECT_EQ(e.remarks, "Hello, world!");
}

TEST(GuestbookForm, ContentTypeMustBeUrlencodedForm) {
  const std::string_view body = "guest-name=Ann&guest-remarks=hi";
  EXPECT_EQ(parse(body, nullptr, "application/x-www-form-urlencoded; charset=UTF-8"),
            form_error::none);
  EXPECT_EQ(parse(body, nullptr, "Application/X-WWW-Form-Urlencoded"), form_error::none);
  EXPECT_EQ(parse(body, nullptr, " application/x-www-form-urlencoded ;charset=utf-8"),
            form_error::none);
  for (std::string_view type : {"", "text/plain", "multipart/form-data; boundary=x",
                                "application/json", "application/x-www-form-urlencodedx"}) {
    EXPECT_EQ(parse(body, nullptr, type), form_error::not_a_form) << type;
  }
}

TEST(GuestbookForm, FieldsAreTrimmedAndOthersIgnored) {
  entry e;
  EXPECT_EQ(parse("x=1&guest-name=%20%09Ann%20&submit=go&guest-remarks=%0D%0A+hi+there+%0A", &e),
            form_error::none);
  EXPECT_EQ(e.name, "Ann");
  EXPECT_EQ(e.remarks, "hi there");
}

TEST(GuestbookForm, FirstOfRepeatedFieldsWins) {
  entry e;
  EXPECT_EQ(parse("guest-name=Ann&guest-name=Bob&guest-remarks=one&guest-remarks=two", &e),
            form_error::none);
  EXPECT_EQ(e.name, "Ann");
  EXPECT_EQ(e.remarks, "one");
}

TEST(GuestbookForm, MissingOrBlankFields) {
  EXPECT_EQ(parse(""), form_error::missing_name);
  EXPECT_EQ(parse("guest-remarks=hi"), form_error::missing_name);
  EXPECT_EQ(parse("guest-name=&guest-remarks=hi"), form_error::missing_name);
  EXPECT_EQ(parse("guest-name=+%09+&guest-remarks=hi"), form_error::missing_name);
  EXPECT_EQ(parse("guest-name=Ann"), form_error::missing_remarks);
  EXPECT_EQ(parse("guest-name=Ann&guest-remarks="), form_error::missing_remarks);
  EXPECT_EQ(parse("guest-name=Ann&guest-remarks=%0D%0A+%0A"), form_error::missing_remarks);
}

TEST(GuestbookForm, LengthLimitsAreInBytesAfterTrimming) {
  const std::string name64(64, 'n');
  const std::string remarks1024(1024, 'r');
  EXPECT_EQ(parse("guest-name=" + name64 + "&guest-remarks=" + remarks1024), form_error::none);
  EXPECT_EQ(parse("guest-name=++" + name64 + "++&guest-remarks=hi"), form_error::none);
  EXPECT_EQ(parse("guest-name=" + name64 + "n&guest-remarks=hi"), form_error::name_too_long);
  EXPECT_EQ(parse("guest-name=Ann&guest-remarks=" + remarks1024 + "r"),
            form_error::remarks_too_long);

  // 33 x U+00E9 is 33 characters but 66 bytes.
  std::string e_acute;
  for (int i = 0; i < 33; ++i) e_acute += "%C3%A9";
  EXPECT_EQ(parse("guest-name=" + e_acute + "&guest-remarks=hi"), form_error::name_too_long);

  guestbook_limits small;
  small.max_name = 3;
  small.max_remarks = 5;
  entry e;
  EXPECT_EQ(parse_guestbook_form(form_type, "guest-name=Ann&guest-remarks=12345", small, e),
            form_error::none);
  EXPECT_EQ(parse_guestbook_form(form_type, "guest-name=Anne&guest-remarks=1", small, e),
            form_error::name_too_long);
  EXPECT_EQ(parse_guestbook_form(form_type, "guest-name=Ann&guest-remarks=123456", small, e),
            form_error::remarks_too_long);
}

TEST(GuestbookForm, BrowserLineBreaksCountOnceAgainstTheLimit) {
  // A browser sends a textarea's line breaks as CR LF; they are stored as LF.
  guestbook_limits small;
  small.max_remarks = 5;
  entry e;
  EXPECT_EQ(parse_guestbook_form(form_type, "guest-name=Ann&guest-remarks=a%0D%0Ab%0Dc", small, e),
            form_error::none);
  EXPECT_EQ(e.remarks, "a\nb\nc");
}

TEST(GuestbookForm, ControlCharactersInNames) {
  for (std::string_view bad : {"A%0Ab", "A%0Db", "A%09b", "A%00b", "A%1Bb", "A%7Fb"}) {
    EXPECT_EQ(parse("guest-name=" + std::string(bad) + "&guest-remarks=hi"),
              form_error::bad_characters)
        << bad;
  }
}

TEST(GuestbookForm, ControlCharactersInRemarks) {
  entry e;
  EXPECT_EQ(parse("guest-name=Ann&guest-remarks=a%09b%0Ac", &e), form_error::none);
  EXPECT_EQ(e.remarks, "a\tb\nc");
  for (std::string_view bad : {"a%00b", "a%07b", "a%1Bb", "a%7Fb", "a%0Bb", "a%0Cb"}) {
    EXPECT_EQ(parse("guest-name=Ann&guest-remarks=" + std::string(bad)), form_error::bad_characters)
        << bad;
  }
}

TEST(GuestbookForm, Utf8MustBeWellFormed) {
  entry e;
  // e-acute, euro sign, U+1F600 and U+10FFFF are fine.
  EXPECT_EQ(parse("guest-name=%C3%A9%E2%82%AC&guest-remarks=%F0%9F%98%80%F4%8F%BF%BF", &e),
            form_error::none);
  EXPECT_EQ(e.name, "\xc3\xa9\xe2\x82\xac");
  for (std::string_view bad : {
           "%C3%28",        // a lead byte without its continuation
           "%FF",           // never valid
           "%80",           // a continuation byte alone
           "%C0%AF",        // overlong "/"
           "%E0%80%AF",     // overlong "/" in three bytes
           "%ED%A0%80",     // a UTF-16 surrogate
           "%F4%90%80%80",  // past U+10FFFF
           "%E2%82",        // cut short
       }) {
    EXPECT_EQ(parse("guest-name=Ann&guest-remarks=x" + std::string(bad)),
              form_error::bad_characters)
        << bad;
    EXPECT_EQ(parse("guest-name=x" + std::string(bad) + "&guest-remarks=hi"),
              form_error::bad_characters)
        << bad;
  }
}

TEST(GuestbookForm, MalformedEscapesAreBadCharacters) {
  EXPECT_EQ(parse("guest-name=%ZZ&guest-remarks=hi"), form_error::bad_characters);
  EXPECT_EQ(parse("guest-name=Ann&guest-remarks=50%"), form_error::bad_characters);
}

TEST(GuestbookForm, OutputIsUntouchedOnError) {
  entry e{"before", "before"};
  EXPECT_EQ(parse("guest-name=Ann", &e), form_error::missing_remarks);
  EXPECT_EQ(e.name, "before");
  EXPECT_EQ(e.remarks, "before");
}

TEST(GuestbookForm, EveryErrorHasADescription) {
  EXPECT_EQ(describe(form_error::none), "");
  for (form_error e :
       {form_error::not_a_form, form_error::missing_name, form_error::missing_remarks,
        form_error::name_too_long, form_error::remarks_too_long, form_error::bad_characters,
        form_error::bad_post_key}) {
    EXPECT_FALSE(describe(e).empty()) << static_cast<int>(e);
  }
}

spoold::guestbook_post parse_post(std::string_view body, form_error expect = form_error::none) {
  spoold::guestbook_post post;
  EXPECT_EQ(parse_guestbook_form(form_type, body, guestbook_limits{}, post), expect) << body;
  return post;
}

TEST(GuestbookForm, PostKeyIsReadWithTheEntry) {
  const auto post = parse_post("guest-name=Ann&guest-remarks=hi&post-key=0123abcDEF-_x");
  EXPECT_EQ(post.entry.name, "Ann");
  EXPECT_EQ(post.entry.remarks, "hi");
  EXPECT_EQ(post.key, "0123abcDEF-_x");
  // The first of repeated fields, as for the others.
  EXPECT_EQ(parse_post("post-key=first&guest-name=A&guest-remarks=r&post-key=second").key, "first");
  EXPECT_EQ(parse_post("guest-name=A&guest-remarks=r&post-key=" + std::string(64, 'k')).key,
            std::string(64, 'k'));
}

TEST(GuestbookForm, NoPostKeyOrAnEmptyOneIsNone) {
  EXPECT_EQ(parse_post("guest-name=A&guest-remarks=r").key, "");  // ZeroHTTPd's form
  EXPECT_EQ(parse_post("guest-name=A&guest-remarks=r&post-key=").key, "");
}

TEST(GuestbookForm, MalformedPostKeyIsRefused) {
  for (const std::string& key : {std::string(65, 'k'), std::string("a%20b"), std::string("a.b"),
                                 std::string("%C3%A9"), std::string("a%0Ab")}) {
    parse_post("guest-name=A&guest-remarks=r&post-key=" + key, form_error::bad_post_key);
  }
  // Name and remarks are judged first: their errors say more to a person.
  parse_post("guest-name=&guest-remarks=r&post-key=a.b", form_error::missing_name);
}

TEST(GuestbookForm, NewPostKeysAreHexAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = spoold::new_post_key();
    ASSERT_EQ(key.size(), 32u);
    EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos) << key;
    EXPECT_TRUE(seen.insert(key).second) << "repeated key " << key;
    // Every new key is one the form accepts.
    parse_post("guest-name=A&guest-remarks=r&post-key=" + key);
  }
}

// ---------------------------------------------------------------------------------------------
// Pages

page sample_page() {
  page p;
  p.visitor_count = 1234;
  p.total_entries = 7;
  p.entries = {{"Ann", "first line\nsecond line"},
               {"<script>alert(1)</script>", "<img src=x onerror=alert(2)> & \"q\" 'a'"},
               {"", "from ZeroHTTPd"}};
  return p;
}

TEST(GuestbookPage, IsACompletePageWithTheExpectedElements) {
  const std::string html = render_guestbook_page(sample_page());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_TRUE(contains(html, "<html lang=\"en\">"));
  EXPECT_TRUE(contains(html, "<meta charset=\"utf-8\">"));
  EXPECT_TRUE(contains(html, "<title>Guestbook</title>"));
  EXPECT_TRUE(contains(html, "<link rel=\"stylesheet\" href=\"/style.css\">"));
  EXPECT_TRUE(contains(html, "id=\"visitor-count\">1234<"));
  EXPECT_TRUE(contains(html, "<ol id=\"entries\""));
  EXPECT_EQ(count_of(html, "<li class=\"entry\"><span class=\"name\">"), 3u);
  EXPECT_EQ(count_of(html, "<p class=\"remarks\">"), 3u);
  EXPECT_TRUE(contains(html, "<form id=\"guestbook-form\" method=\"post\" action=\"/guestbook\">"));
  EXPECT_TRUE(contains(html, "name=\"guest-name\" id=\"guest-name\" maxlength=\"64\" required"));
  EXPECT_TRUE(contains(html, "name=\"guest-remarks\" id=\"guest-remarks\" maxlength=\"1024\""));
  EXPECT_TRUE(contains(html, "id=\"guest-submit\""));
  EXPECT_TRUE(contains(html, "href=\"/\""));
  EXPECT_TRUE(contains(html, "href=\"/dashboard\""));
  EXPECT_FALSE(contains(html, "id=\"notice\""));
  EXPECT_TRUE(html.ends_with("</html>\n"));
  // The last 3 of 7 entries are numbers 5 to 7.
  EXPECT_TRUE(contains(html, "<ol id=\"entries\" start=\"5\">"));
}

TEST(GuestbookPage, EntriesAreEscapedAndInOrder) {
  const std::string html = render_guestbook_page(sample_page());
  EXPECT_FALSE(contains(html, "<script>"));
  EXPECT_FALSE(contains(html, "<img"));
  EXPECT_TRUE(contains(html, "<span class=\"name\">&lt;script&gt;alert(1)&lt;/script&gt;</span>"));
  EXPECT_TRUE(contains(html, "&lt;img src=x onerror=alert(2)&gt; &amp; &quot;q&quot; &#39;a&#39;"));
  EXPECT_TRUE(contains(html, "<p class=\"remarks\">first line<br>\nsecond line</p>"));
  EXPECT_TRUE(contains(html,
                       "<span class=\"name\">anonymous</span><p class=\"remarks\">from "
                       "ZeroHTTPd</p>"));
  EXPECT_LT(html.find("first line"), html.find("alert(1)"));
  EXPECT_LT(html.find("alert(1)"), html.find("from ZeroHTTPd"));
}

TEST(GuestbookPage, CrLfInStoredRemarksIsOneBreak) {
  page p;
  p.total_entries = 1;
  p.entries = {{"Ann", "a\r\nb\rc"}};
  EXPECT_TRUE(contains(render_guestbook_page(p), ">a<br>\nb<br>\nc</p>"));
}

TEST(GuestbookPage, NoticeIsShownEscaped) {
  const std::string html = render_guestbook_page(sample_page(), "Bad <input> & \"more\"");
  EXPECT_TRUE(contains(html, "id=\"notice\""));
  EXPECT_TRUE(contains(html, "Bad &lt;input&gt; &amp; &quot;more&quot;"));
}

TEST(GuestbookPage, EmptyBookHasAnEmptyList) {
  const std::string html = render_guestbook_page(page{});
  EXPECT_TRUE(contains(html, "<ol id=\"entries\" start=\"1\">\n</ol>"));
  EXPECT_TRUE(contains(html, "id=\"visitor-count\">0<"));
}

TEST(GuestbookPage, FormLimitsFollowTheConfiguredLimits) {
  guestbook_limits limits;
  limits.max_name = 10;
  limits.max_remarks = 200;
  const std::string html = render_guestbook_page(page{}, {}, limits);
  EXPECT_TRUE(contains(html, "id=\"guest-name\" maxlength=\"10\""));
  EXPECT_TRUE(contains(html, "id=\"guest-remarks\" maxlength=\"200\""));
}

TEST(GuestbookPage, FormCarriesThePostKeyAndTheNodeIsShown) {
  const std::string html =
      render_guestbook_page(sample_page(), {}, guestbook_limits{}, {"web2", "0f0f"});
  EXPECT_TRUE(contains(html,
                       "<input type=\"hidden\" name=\"post-key\" id=\"post-key\" "
                       "value=\"0f0f\">"));
  EXPECT_LT(html.find("id=\"guestbook-form\""), html.find("name=\"post-key\""));
  EXPECT_LT(html.find("name=\"post-key\""), html.find("</form>"));
  EXPECT_TRUE(contains(html, "<span id=\"node-name\">web2</span>"));
  // Without them, neither appears.
  const std::string plain = render_guestbook_page(sample_page());
  EXPECT_FALSE(contains(plain, "post-key"));
  EXPECT_FALSE(contains(plain, "node-name"));
}

TEST(StoreDownPage, SaysWhatIsKnownOfThePost) {
  using kind = spoold::store_trouble::kind;
  const std::string no_primary = render_store_down_page(
      "no primary", {.what = kind::no_primary, .post_had_key = false, .node = "web3"});
  EXPECT_TRUE(contains(no_primary, "no primary"));
  EXPECT_TRUE(contains(no_primary, "nothing was read or stored"));
  EXPECT_TRUE(contains(no_primary, "<span id=\"node-name\">web3</span>"));

  const std::string busy =
      render_store_down_page("all 64 connections busy", {.what = kind::busy, .node = {}});
  EXPECT_TRUE(contains(busy, "too busy"));
  EXPECT_TRUE(contains(busy, "nothing was read or stored"));
  EXPECT_TRUE(contains(busy, "all 64 connections busy"));

  const std::string with_key = render_store_down_page(
      "2 replicas", {.what = kind::outcome_unknown, .post_had_key = true, .node = {}});
  EXPECT_TRUE(contains(with_key, "may or may not have been stored"));
  EXPECT_TRUE(contains(with_key, "Sending the form again is safe"));

  const std::string without_key = render_store_down_page(
      "2 replicas", {.what = kind::outcome_unknown, .post_had_key = false, .node = {}});
  EXPECT_TRUE(contains(without_key, "may or may not have been stored"));
  EXPECT_FALSE(contains(without_key, "Sending the form again is safe"));
  EXPECT_TRUE(contains(without_key, "look at the guestbook before you post it again"));
}

TEST(StoreDownPage, SaysUnavailableAndEscapesTheDetail) {
  const std::string html = render_store_down_page("redis://127.0.0.1:6379: <refused>");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_TRUE(contains(html, "unavailable"));
  EXPECT_TRUE(contains(html, "try again"));
  EXPECT_TRUE(contains(html, "redis://127.0.0.1:6379: &lt;refused&gt;"));
  EXPECT_FALSE(contains(html, "<refused>"));
}

}  // namespace
