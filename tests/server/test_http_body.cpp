// Request bodies (server/http/body.hpp): Content-Length and chunked framing, through
// parse_request as a connection sees them.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "http/parser.hpp"
#include "http_prefixes.hpp"

namespace {

using spoold::http::limits;
using spoold::http::parse_request;
using spoold::http::parse_result;
using spoold::http::parse_status;
using spoold::http::request;
using spoold::http::testing_support::expect_prefixes_consistent;

const std::string chunked_head =
    "POST /guestbook HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

parse_result parse(std::string_view buffer, request& out, const limits& lim = {}) {
  return parse_request(buffer, lim, out);
}

int error_of(std::string_view buffer, const limits& lim = {}) {
  request r;
  const parse_result res = parse_request(buffer, lim, r);
  return res.status == parse_status::error ? res.error_status : 0;
}

TEST(HttpBody, ChunkedBodyIsDecoded) {
  const std::string in =
      chunked_head + "5\r\nguest\r\n1a\r\n-name=Ann&guest-remarks=hi\r\n0\r\n\r\n";
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, in.size());
  EXPECT_TRUE(r.chunked);
  EXPECT_EQ(r.body, "guest-name=Ann&guest-remarks=hi");
  EXPECT_EQ(r.content_length, r.body.size());
  expect_prefixes_consistent(in);
}

TEST(HttpBody, ExtensionsAreIgnoredAndTrailersDiscarded) {
  const std::string in = chunked_head +
                         "3;name=value\r\nabc\r\n"
                         "2 ; a ; b = \"q \\\" \\\\ ;\" ;c=tok\r\nde\r\n"
                         "0;last\r\n"
                         "X-Checksum: 1234\r\nX-Empty:\r\n\r\n";
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, in.size());
  EXPECT_EQ(r.body, "abcde");
  EXPECT_EQ(r.find("X-Checksum"), nullptr);  // trailers are not headers
  expect_prefixes_consistent(in);
}

TEST(HttpBody, HexSizesAndBareLfLineEnds) {
  const std::string data(0x1F, 'z');
  const std::string in = chunked_head + "1f\n" + data + "\n00000\n\n";
  request r;
  ASSERT_EQ(parse(in, r).status, parse_status::complete);
  EXPECT_EQ(r.body, data);
  const std::string upper = chunked_head + "0A\r\n0123456789\r\n0\r\n\r\n";
  ASSERT_EQ(parse(upper, r).status, parse_status::complete);
  EXPECT_EQ(r.body, "0123456789");
  // Whitespace after the size is bad whitespace (BWS): tolerated, as before an extension.
  ASSERT_EQ(parse(chunked_head + "2 \t\r\nok\r\n0 \r\n\r\n", r).status, parse_status::complete);
  EXPECT_EQ(r.body, "ok");
}

TEST(HttpBody, EmptyChunkedBody) {
  request r;
  const std::string in = chunked_head + "0\r\n\r\n";
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, in.size());
  EXPECT_TRUE(r.body.empty());
}

TEST(HttpBody, PipelinedAfterChunked) {
  const std::string first = chunked_head + "2\r\nok\r\n0\r\n\r\n";
  const std::string second = "GET /next HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::string in = first + second;
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_EQ(res.consumed, first.size());
  EXPECT_EQ(r.body, "ok");
  ASSERT_EQ(parse(std::string_view(in).substr(res.consumed), r).status, parse_status::complete);
  EXPECT_EQ(r.path, "/next");
  EXPECT_FALSE(r.chunked);
  EXPECT_TRUE(r.body.empty());
}

TEST(HttpBody, IncompleteSaysWhenToParseAgain) {
  request r;
  // In a chunk's data: the length at which the data and a line end byte are in.
  std::string in = chunked_head + "a\r\n0123";
  parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::incomplete);
  EXPECT_EQ(res.needed, chunked_head.size() + 3 + 10 + 1);
  EXPECT_FALSE(res.awaits_line);
  // In a chunk-size line: a line end, or the length at which the line is too long.
  in = chunked_head + "a;ext";
  res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::incomplete);
  EXPECT_TRUE(res.awaits_line);
  EXPECT_GT(res.needed, in.size());
  // In the trailer section likewise.
  in = chunked_head + "0\r\nX: y";
  res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::incomplete);
  EXPECT_TRUE(res.awaits_line);
}

TEST(HttpBody, ExpectContinueBeforeTheFirstChunk) {
  const std::string head =
      "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n";
  request r;
  parse_result res = parse(head, r);
  ASSERT_EQ(res.status, parse_status::incomplete);
  EXPECT_TRUE(res.needs_continue);
  res = parse(head + "1", r);
  ASSERT_EQ(res.status, parse_status::incomplete);
  EXPECT_FALSE(res.needs_continue);
}

TEST(HttpBody, DecodedSizeLimitIsMaxBody) {
  limits lim;
  lim.max_body = 10;
  request r;
  // Exactly the limit, in two chunks.
  ASSERT_EQ(parse(chunked_head + "6\r\n012345\r\n4\r\n6789\r\n0\r\n\r\n", r, lim).status,
            parse_status::complete);
  EXPECT_EQ(r.body, "0123456789");
  // One over: 413 as soon as the chunk-size line that passes it ends, before its data.
  EXPECT_EQ(error_of(chunked_head + "6\r\n012345\r\n5\r\n", lim), 413);
  EXPECT_EQ(error_of(chunked_head + "b\r\n", lim), 413);
  // The same status as an oversized Content-Length.
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n", lim), 413);
  EXPECT_EQ(error_of(chunked_head + "ffffffffffffffff\r\n"), 413);
}

TEST(HttpBody, RequestAsSentIsBounded) {
  limits lim;
  lim.max_head = 128;
  lim.max_body = 64;
  // Framing overhead may not make the request outgrow max_head + max_body: extensions that
  // never end are refused once past it, though the decoded body is small.
  std::string in = chunked_head + "1\r\nx\r\n";
  while (in.size() <= lim.max_head + lim.max_body) in += "1;e\r\nx\r\n";
  EXPECT_EQ(error_of(in, lim), 413);
  expect_prefixes_consistent(in, lim);
}

TEST(HttpBody, TooManyChunks) {
  std::string in = chunked_head;
  for (int i = 0; i < 1025; ++i) in += "1\r\nx\r\n";
  EXPECT_EQ(error_of(in), 413);
  std::string ok = chunked_head;
  for (int i = 0; i < 1024; ++i) ok += "1\r\nx\r\n";
  ok += "0\r\n\r\n";
  request r;
  ASSERT_EQ(parse(ok, r).status, parse_status::complete);
  EXPECT_EQ(r.body.size(), 1024u);
}

TEST(HttpBody, TooManyTrailerLines) {
  limits lim;
  lim.max_headers = 2;
  EXPECT_EQ(error_of(chunked_head + "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", lim), 431);
  request r;
  EXPECT_EQ(parse(chunked_head + "0\r\nA: 1\r\nB: 2\r\n\r\n", r, lim).status,
            parse_status::complete);
}

TEST(HttpBody, MalformedChunkedFramingIs400) {
  const std::vector<std::string> bad = {
      "x\r\n",                                  // not hex
      "\r\n",                                   // no size
      "-1\r\n",                                 // sign
      "+1\r\n",                                 // sign
      "0x5\r\nhello\r\n0\r\n\r\n",              // C prefix
      "1 2\r\n",                                // two sizes
      "1;\r\n",                                 // empty extension name
      "1;a=\r\n",                               // empty extension value
      "1;a=\"open\r\n",                         // unterminated quoted string
      "1;a b\r\n",                              // junk after the name
      "1;a=b c\r\n",                            // junk after the value
      "1;(x)\r\n",                              // not a token
      "10000000000000000\r\n",                  // beyond 64 bits
      "3\r\nabcX\r\n0\r\n\r\n",                 // data longer than its size
      "3\r\na\r\n0\r\n\r\n",                    // data shorter than its size
      "3\r\nabc\rX",                            // bare CR after the data
      "3\rX",                                   // bare CR ends the size line
      "0\r\n\rX",                               // bare CR ends the trailer section
      "0\r\nX: a\rb",                           // bare CR in a trailer line
      "0\r\nNo colon\r\n\r\n",                  // malformed trailer
      "0\r\n folded: x\r\n\r\n",                // folded trailer
      std::string("0\r\nX: a\0b\r\n\r\n", 12),  // NUL in a trailer value
      "1;" + std::string(9000, 'e') + "\r\n",   // size line too long
      "1;" + std::string(9000, 'e'),            // ... refused before its line end
  };
  for (const std::string& body : bad) {
    const std::string in = chunked_head + body;
    EXPECT_EQ(error_of(in), 400) << testing::PrintToString(body);
    expect_prefixes_consistent(in);
  }
}

TEST(HttpBody, ContentLengthBodyIsUnchanged) {
  const std::string in = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
  request r;
  const parse_result res = parse(in, r);
  ASSERT_EQ(res.status, parse_status::complete);
  EXPECT_FALSE(r.chunked);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.body.data(), in.data() + in.size() - 5);  // a view into the buffer, not a copy
}

}  // namespace
