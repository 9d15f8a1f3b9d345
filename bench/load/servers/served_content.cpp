#include "servers/served_content.hpp"

#include "servers/temp_dir.hpp"

namespace bench {

namespace {

#ifdef SPOOL_LOAD_BENCH_SITE
constexpr const char* repository_site = SPOOL_LOAD_BENCH_SITE;  // the repository's server/site
#else
constexpr const char* repository_site = "";
#endif

}  // namespace

std::string served_root(const load_options& o) {
  return o.site_root.empty() ? repository_site : o.site_root;
}

std::string served_url_path(const load_options& o) {
  return o.url_path.empty() ? "/index.html" : o.url_path;
}

bool is_guestbook(const std::string& url_path) { return url_path == guestbook_path; }

expected_answer expected_at(const std::string& root, const std::string& url_path) {
  if (is_guestbook(url_path)) return {"<title>Guestbook</title>", true};
  return {read_file(root + url_path), false};
}

}  // namespace bench
