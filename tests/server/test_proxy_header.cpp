// The PROXY protocol header parser (server/http/proxy_header.hpp): versions 1 and 2, the
// addresses they carry, the headers that carry none, and every kind of error, each decided as
// soon as the bytes show it.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/proxy_header.hpp"

namespace {

using spoold::http::max_proxy_header;
using spoold::http::max_v1_header;
using spoold::http::max_v2_payload;
using spoold::http::parse_proxy_header;
using spoold::http::proxy_error;
using spoold::http::proxy_header_result;
using spoold::http::proxy_status;

const std::string v2_signature("\r\n\r\n\0\r\nQUIT\n", 12);

std::array<std::uint8_t, 16> v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

// A v2 header: version/command byte, family/transport byte, then `payload` (its length is
// written in front of it).
std::string v2(std::uint8_t version_command, std::uint8_t family_transport,
               const std::string& payload) {
  std::string h = v2_signature;
  h += static_cast<char>(version_command);
  h += static_cast<char>(family_transport);
  h += static_cast<char>(payload.size() >> 8);
  h += static_cast<char>(payload.size() & 0xff);
  return h + payload;
}

std::string bytes(std::initializer_list<int> list) {
  std::string s;
  for (const int b : list) s += static_cast<char>(b);
  return s;
}

// Every proper prefix of `in` is incomplete or ends as `in` does; `in` itself is returned.
proxy_header_result parse_checking_prefixes(std::string_view in) {
  const proxy_header_result whole = parse_proxy_header(in);
  for (std::size_t n = 0; n < in.size(); ++n) {
    const proxy_header_result part = parse_proxy_header(in.substr(0, n));
    if (part.status == proxy_status::incomplete) {
      EXPECT_EQ(part.error, proxy_error::none) << "prefix " << n;
      continue;
    }
    EXPECT_EQ(part.status, whole.status) << "prefix " << n;
    EXPECT_EQ(part.error, whole.error) << "prefix " << n;
    EXPECT_EQ(part.length, whole.length) << "prefix " << n;
  }
  return whole;
}

proxy_error error_of(std::string_view in) {
  const proxy_header_result r = parse_checking_prefixes(in);
  EXPECT_EQ(r.status, proxy_status::error) << testing::PrintToString(in);
  return r.error;
}

TEST(ProxyHeaderV1, Tcp4SourceAndLength) {
  const std::string line = "PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n";
  const proxy_header_result r = parse_checking_prefixes(line + "GET / HTTP/1.1\r\n");
  ASSERT_EQ(r.status, proxy_status::complete);
  EXPECT_EQ(r.version, 1);
  EXPECT_EQ(r.length, line.size());  // the request after it is not the header's
  EXPECT_TRUE(r.has_source);
  EXPECT_EQ(r.source, v4(192, 0, 2, 7));
  EXPECT_EQ(r.source_port, 56324);
}

TEST(ProxyHeaderV1, Tcp6Source) {
  const proxy_header_result r =
      parse_checking_prefixes("PROXY TCP6 2001:db8::1 2001:db8::2 65535 0\r\n");
  ASSERT_EQ(r.status, proxy_status::complete);
  EXPECT_TRUE(r.has_source);
  const std::array<std::uint8_t, 16> expected = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                                 0,    0,    0,    0,    0, 0, 0, 1};
  EXPECT_EQ(r.source, expected);
  EXPECT_EQ(r.source_port, 65535);
}

TEST(ProxyHeaderV1, UnknownCarriesNoSource) {
  for (const std::string line :
       {"PROXY UNKNOWN\r\n", "PROXY UNKNOWN 192.0.2.7 198.51.100.1 1 2\r\n",
        "PROXY UNKNOWN anything at all\r\n"}) {
    const proxy_header_result r = parse_checking_prefixes(line);
    ASSERT_EQ(r.status, proxy_status::complete) << line;
    EXPECT_EQ(r.length, line.size());
    EXPECT_FALSE(r.has_source);
  }
}

TEST(ProxyHeaderV1, LongestLinesAreAccepted) {
  const std::string addresses =
      " ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 "
      "65535\r\n";
  // The spec's worst cases: 104 bytes for TCP6, 107 for UNKNOWN with the same fields.
  for (const std::string& longest : {"PROXY TCP6" + addresses, "PROXY UNKNOWN" + addresses}) {
    const proxy_header_result r = parse_checking_prefixes(longest);
    ASSERT_EQ(r.status, proxy_status::complete);
    EXPECT_EQ(r.length, longest.size());
  }
  EXPECT_EQ(("PROXY UNKNOWN" + addresses).size(), max_v1_header);
}

TEST(ProxyHeaderV1, Errors) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\n"), proxy_error::not_proxy);
  EXPECT_EQ(error_of("PROXZ TCP4"), proxy_error::not_proxy);
  EXPECT_EQ(error_of("proxy TCP4 1.2.3.4 1.2.3.5 1 2\r\n"), proxy_error::not_proxy);
  for (const std::string bad : {"PROXY TCP4 1.2.3.4 1.2.3.5 1 2\n",        // bare LF
                                "PROXY TCP4 1.2.3.4 1.2.3.5 1 2\rX",       // bare CR
                                "PROXY TCP4 1.2.3.4\t1.2.3.5 1 2\r\n",     // a control character
                                "PROXY TCP4  1.2.3.4 1.2.3.5 1 2\r\n",     // two spaces
                                "PROXY TCP4 1.2.3.4 1.2.3.5 1 2 \r\n",     // a trailing space
                                "PROXY TCP4 1.2.3.4 1.2.3.5 1\r\n",        // a field short
                                "PROXY TCP4 1.2.3.4 1.2.3.5 1 2 3\r\n",    // a field too many
                                "PROXY TCP5 1.2.3.4 1.2.3.5 1 2\r\n",      // no such protocol
                                "PROXY tcp4 1.2.3.4 1.2.3.5 1 2\r\n",      // case matters
                                "PROXY TCP4 2001:db8::1 1.2.3.5 1 2\r\n",  // IPv6 under TCP4
                                "PROXY TCP6 1.2.3.4 2001:db8::1 1 2\r\n",  // IPv4 under TCP6
                                "PROXY TCP4 1.2.3.256 1.2.3.5 1 2\r\n",    // not an address
                                "PROXY TCP4 1.2.3.4 1.2.3.5 65536 2\r\n",  // port out of range
                                "PROXY TCP4 1.2.3.4 1.2.3.5 01 2\r\n",     // leading zero
                                "PROXY TCP4 1.2.3.4 1.2.3.5 -1 2\r\n",     // not a number
                                "PROXY \r\n", "PROXY UNKNOWNX\r\n"}) {
    EXPECT_EQ(error_of(bad), proxy_error::malformed) << testing::PrintToString(bad);
  }
}

TEST(ProxyHeaderV1, NoLineEndWithinTheLimitIsOversized) {
  const std::string no_end = "PROXY UNKNOWN " + std::string(200, 'x');
  EXPECT_EQ(error_of(no_end), proxy_error::oversized);
  // The limit is exact: 106 bytes without a line end leave room only for a bare CR.
  const std::string at_limit = "PROXY UNKNOWN " + std::string(max_v1_header - 16, 'x') + "\r\n";
  ASSERT_EQ(at_limit.size(), max_v1_header);
  EXPECT_EQ(parse_checking_prefixes(at_limit).status, proxy_status::complete);
  const std::string past = "PROXY UNKNOWN " + std::string(max_v1_header - 15, 'x') + "\r\n";
  EXPECT_EQ(error_of(past), proxy_error::oversized);
}

TEST(ProxyHeaderV2, InetSource) {
  const std::string h = v2(0x21, 0x11, bytes({203, 0, 113, 9, 10, 0, 0, 1, 0xdc, 0x05, 0, 80}));
  const proxy_header_result r = parse_checking_prefixes(h + "GET / HTTP/1.1\r\n");
  ASSERT_EQ(r.status, proxy_status::complete);
  EXPECT_EQ(r.version, 2);
  EXPECT_EQ(r.length, 28u);
  EXPECT_TRUE(r.has_source);
  EXPECT_EQ(r.source, v4(203, 0, 113, 9));
  EXPECT_EQ(r.source_port, 0xdc05);
}

TEST(ProxyHeaderV2, Inet6SourceWithTlvsSkipped) {
  std::string block = bytes({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42});
  block += std::string(16, '\x01');  // destination
  block += bytes({0x12, 0x34, 0x01, 0xbb});
  const std::string tlv = bytes({0x04, 0x00, 0x05}) + "abcde";  // PP2_TYPE_NOOP
  const std::string h = v2(0x21, 0x21, block + tlv);
  const proxy_header_result r = parse_checking_prefixes(h + "rest");
  ASSERT_EQ(r.status, proxy_status::complete);
  EXPECT_EQ(r.length, h.size());
  EXPECT_TRUE(r.has_source);
  EXPECT_EQ(r.source[15], 0x42);
  EXPECT_EQ(r.source[0], 0x20);
  EXPECT_EQ(r.source_port, 0x1234);
}

TEST(ProxyHeaderV2, LocalUnspecAndUnixCarryNoSource) {
  // LOCAL, with and without an address block (which it ignores).
  for (const std::string& h :
       {v2(0x20, 0x00, ""), v2(0x20, 0x11, bytes({1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2})),
        v2(0x21, 0x00, ""), v2(0x21, 0x31, std::string(216, '\0'))}) {
    const proxy_header_result r = parse_checking_prefixes(h);
    ASSERT_EQ(r.status, proxy_status::complete);
    EXPECT_EQ(r.length, h.size());
    EXPECT_FALSE(r.has_source);
  }
}

TEST(ProxyHeaderV2, Errors) {
  EXPECT_EQ(error_of("\r\n\r\nGET / HTTP/1.1\r\n"), proxy_error::not_proxy);
  EXPECT_EQ(error_of(std::string("\r\n\r\n\0\r\nQUIZ\n", 12)), proxy_error::not_proxy);
  EXPECT_EQ(error_of(std::string(1, '\x16')), proxy_error::not_proxy);  // a TLS handshake
  const std::string inet = bytes({1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2});
  for (const std::string& bad : {v2(0x11, 0x11, inet),  // version 1 in the binary form
                                 v2(0x22, 0x11, inet),  // no such command
                                 v2(0x21, 0x41, inet),  // no such family
                                 v2(0x21, 0x13, inet),  // no such transport
                                 v2(0x21, 0x12, inet),  // UDP cannot carry this connection
                                 v2(0x21, 0x10, inet),  // nor an unspecified transport
                                 v2(0x21, 0x11, inet.substr(0, 11)),       // address block short
                                 v2(0x21, 0x21, std::string(35, '\0')),    // IPv6 block short
                                 v2(0x21, 0x31, std::string(215, '\0'))})  // UNIX block short
  {
    EXPECT_EQ(error_of(bad), proxy_error::malformed) << testing::PrintToString(bad);
  }
}

TEST(ProxyHeaderV2, DeclaredLengthPastTheLimitIsOversized) {
  const std::string at_limit = v2(0x21, 0x11, std::string(max_v2_payload, '\0'));
  ASSERT_EQ(at_limit.size(), max_proxy_header);
  EXPECT_EQ(parse_checking_prefixes(at_limit).status, proxy_status::complete);
  // Decided by the length field alone, before the payload arrives.
  const std::string past = v2_signature + bytes({0x21, 0x11, 0x07, 0xf1});
  EXPECT_EQ(error_of(past), proxy_error::oversized);
  EXPECT_EQ(error_of(v2_signature + bytes({0x21, 0x11, 0xff, 0xff})), proxy_error::oversized);
}

TEST(ProxyHeader, TruncatedIsIncompleteNotWrong) {
  for (const std::string& h :
       {std::string("PROXY TCP4 192.0.2.7 198.51.100.1 56324 443"),
        v2(0x21, 0x11, bytes({1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2})).substr(0, 20), std::string(""),
        std::string("P"), v2_signature.substr(0, 5)}) {
    const proxy_header_result r = parse_proxy_header(h);
    EXPECT_EQ(r.status, proxy_status::incomplete) << testing::PrintToString(h);
    EXPECT_EQ(r.error, proxy_error::none);
  }
}

}  // namespace
