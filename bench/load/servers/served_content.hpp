// served_content.hpp: what the servers of a run serve (a file under --root, or spoold's
// guestbook page) and what a probe GET must get back before a server is measured.
#pragma once

#include <string>

#include "load_options.hpp"

namespace bench {

// What the servers serve: --root (default: the repository's server/site) and the URL path
// requested, --file (default /index.html).
std::string served_root(const load_options& o);
std::string served_url_path(const load_options& o);

// --file /guestbook loads spoold's application instead of a file: every GET is a store visit
// (the visitor count written and the last entries read, in SQLite in the server's temporary
// directory), so each request waits on the store as ZeroHTTPd's waited on Redis. spoold only:
// nginx serves files. The page changes with every visit, so the probe checks its status and
// title, not its bytes.
inline constexpr const char* guestbook_path = "/guestbook";
bool is_guestbook(const std::string& url_path);

// What a probe expects at `url_path`: the file's bytes, or for the guestbook its title
// (`page` is then true).
struct expected_answer {
  std::string text;
  bool page = false;
};
expected_answer expected_at(const std::string& root, const std::string& url_path);

// All three for one run.
struct served_content {
  std::string root, url_path;
  expected_answer expected;
};

}  // namespace bench
