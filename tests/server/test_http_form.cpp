// percent_decode, parse_form and html_escape (server/http/form.hpp).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/form.hpp"

namespace {

using spoold::http::html_escape;
using spoold::http::parse_form;
using spoold::http::percent_decode;
using spoold::http::percent_decode_append;

struct decode_case {
  std::string_view in;
  bool plus_is_space;
  std::optional<std::string> out;  // nullopt: malformed
};

TEST(HttpForm, PercentDecode) {
  const std::vector<decode_case> cases = {
      {"", false, ""},
      {"plain", false, "plain"},
      {"%41", false, "A"},
      {"%4a%4A", false, "JJ"},
      {"a%20b", false, "a b"},
      {"%e2%82%AC", false, "\xe2\x82\xac"},
      {"a+b", false, "a+b"},
      {"a+b", true, "a b"},
      {"++", true, "  "},
      {"%2B", true, "+"},
      {"%25", false, "%"},
      {"%2541", false, "%41"},  // decoded once only
      {"%00", false, std::string(1, '\0')},
      {"%", false, std::nullopt},
      {"%4", false, std::nullopt},
      {"abc%", true, std::nullopt},
      {"abc%a", true, std::nullopt},
      {"%G1", false, std::nullopt},
      {"%1G", false, std::nullopt},
      {"%%41", false, std::nullopt},
      {"%-1", false, std::nullopt},
  };
  for (const decode_case& c : cases) {
    EXPECT_EQ(percent_decode(c.in, c.plus_is_space), c.out)
        << testing::PrintToString(std::string(c.in)) << " plus_is_space=" << c.plus_is_space;
  }
}

TEST(HttpForm, PercentDecodeAppendKeepsWhatIsThere) {
  std::string out = "prefix:";
  ASSERT_TRUE(percent_decode_append("a%2Fb+c", true, out));
  EXPECT_EQ(out, "prefix:a/b c");
  EXPECT_FALSE(percent_decode_append("%zz", true, out));
}

using fields = std::vector<std::pair<std::string, std::string>>;

struct form_case {
  std::string_view body;
  std::optional<fields> out;
};

TEST(HttpForm, ParseForm) {
  const std::vector<form_case> cases = {
      {"", fields{}},
      {"a=1&b=two+words", fields{{"a", "1"}, {"b", "two words"}}},
      {"name=Ann&message=Hello%2C+world%21", fields{{"name", "Ann"}, {"message", "Hello, world!"}}},
      {"k=a%3Db%26c", fields{{"k", "a=b&c"}}},
      {"a=1=2", fields{{"a", "1=2"}}},
      {"flag", fields{{"flag", ""}}},
      {"a=", fields{{"a", ""}}},
      {"=x", fields{{"", "x"}}},
      {"=", fields{{"", ""}}},
      {"a=1&&b=2&", fields{{"a", "1"}, {"b", "2"}}},
      {"&&&", fields{}},
      {"x=1&x=2", fields{{"x", "1"}, {"x", "2"}}},
      {"t=%E2%9C%93", fields{{"t", "\xe2\x9c\x93"}}},
      {"a%2Bb=c+d", fields{{"a+b", "c d"}}},
      {"a=%zz", std::nullopt},
      {"a=1&b=%", std::nullopt},
      {"%4=1", std::nullopt},
  };
  for (const form_case& c : cases) {
    EXPECT_EQ(parse_form(c.body), c.out) << c.body;
  }
}

TEST(HttpForm, HtmlEscape) {
  EXPECT_EQ(html_escape(""), "");
  EXPECT_EQ(html_escape("plain text"), "plain text");
  EXPECT_EQ(html_escape("<script>alert(\"x\" & 'y')</script>"),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;");
  EXPECT_EQ(html_escape("&amp;"), "&amp;amp;");  // escaping is not idempotent, by design
  EXPECT_EQ(html_escape("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(html_escape(std::string_view("a\0b", 3)), std::string("a\0b", 3));
}

}  // namespace
