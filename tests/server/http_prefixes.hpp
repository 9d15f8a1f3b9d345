// A check shared by the parser and body tests: parse_request on every prefix of an input.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "http/parser.hpp"

namespace spoold::http::testing_support {

// Feeding a request one byte at a time gives `incomplete` for every proper prefix (or, for a
// malformed request, the same error as the whole), and the whole gives the same result as a
// one-shot parse.
inline void expect_prefixes_consistent(std::string_view in, const limits& lim = {}) {
  request whole_request;
  const parse_result whole = parse_request(in, lim, whole_request);
  for (std::size_t n = 0; n < in.size(); ++n) {
    request r;
    const parse_result part = parse_request(in.substr(0, n), lim, r);
    if (part.status == parse_status::incomplete) continue;
    ASSERT_EQ(part.status, whole.status) << "prefix " << n << " of " << testing::PrintToString(in);
    ASSERT_EQ(part.error_status, whole.error_status) << "prefix " << n;
    ASSERT_EQ(part.consumed, whole.consumed) << "prefix " << n;
    if (part.status == parse_status::complete) {
      ASSERT_EQ(r.body, whole_request.body) << "prefix " << n;
    }
  }
}

}  // namespace spoold::http::testing_support
