// http_probe.hpp: one GET before a measurement, to make sure a server answers 200 with the
// file itself, so that every server in a comparison does the same work.
#pragma once

#include <cstdint>
#include <string>

namespace bench {

// GETs `path` from 127.0.0.1:port (HTTP/1.1, Connection: close) and checks for status 200
// and a body equal to `expected_body`. Throws std::runtime_error saying what differed.
void expect_file_served(std::uint16_t port, const std::string& path,
                        const std::string& expected_body);

// GETs `path` and checks for status 200 and a body containing `marker`: for a page that
// changes with every request (spoold's guestbook).
void expect_page_served(std::uint16_t port, const std::string& path, const std::string& marker);

}  // namespace bench
