#include "servers/compared_servers.hpp"

#include <filesystem>

#include "plot.hpp"
#include "servers/nginx.hpp"
#include "servers/run_setup.hpp"
#include "servers/spoold.hpp"

namespace bench {

namespace {

#ifdef SPOOL_LOAD_BENCH_SPOOLD
constexpr const char* built_spoold = SPOOL_LOAD_BENCH_SPOOLD;  // $<TARGET_FILE:spoold>
#else
constexpr const char* built_spoold = "";
#endif

}  // namespace

std::string spoold_binary(const load_options& o) {
  return o.spoold_path.empty() ? built_spoold : o.spoold_path;
}

void check_servers(const load_options& o, const std::vector<std::string>& servers,
                   const std::string& root, const std::string& url_path, const char* who) {
  for (const std::string& name : servers) {
    if (name == "nginx" && is_guestbook(url_path))
      cannot_run(who, std::string("--file ") + guestbook_path +
                          " is spoold's application and nginx serves files: pass --servers "
                          "spoold");
    if (name == "nginx" && !is_executable(nginx_binary))
      cannot_run(who, std::string(nginx_binary) +
                          " is missing; scripts/install-deps.sh installs nginx (or leave it out: "
                          "--servers spoold)");
    if (name != "spoold") continue;
    const std::string binary = spoold_binary(o);
    if (binary.empty())
      cannot_run(who, "this spool-load-bench was built without spoold: pass --spoold PATH");
    if (!is_executable(binary))
      cannot_run(who, "no spoold at " + binary +
                          (o.spoold_path.empty()
                               ? ": build it (cmake --build BUILD --target spoold) or pass "
                                 "--spoold PATH"
                               : ""));
  }
  const std::string file = root + url_path;
  if (!is_guestbook(url_path) && !std::filesystem::is_regular_file(file))
    cannot_run(who, "no file " + file + " to serve (--root DIR, --file /PATH)");
}

served_content checked_content(const load_options& o, const std::vector<std::string>& servers,
                               const char* who) {
  served_content c{served_root(o), served_url_path(o), {}};
  check_servers(o, servers, c.root, c.url_path, who);
  c.expected = expected_at(c.root, c.url_path);
  return c;
}

std::vector<server_kind> server_kinds(const load_options& o,
                                      const std::vector<std::string>& servers,
                                      const std::string& root,
                                      const std::vector<std::string>& spoold_variants,
                                      const std::vector<std::string>& spoold_args) {
  std::vector<server_kind> kinds;
  for (const std::string& name : servers) {
    if (name == "nginx") {
      kinds.push_back(nginx_kind(nginx_binary, root));
      continue;
    }
    for (const std::string& variant : spoold_variants)
      kinds.push_back(spoold_kind(spoold_binary(o), root, variant, spoold_args));
  }
  return kinds;
}

std::string server_colour(const std::string& row_name) {
  // Models in the order of the ZeroHTTPd table, from slow classics to the event loops; nginx
  // and the default (epoll) keep the colours the other charts give them.
  static const colour_table colours{{"epoll", "#d62728"},
                                    {"iterative", "#7f7f7f"},
                                    {"forking", "#8c564b"},
                                    {"preforked", "#e377c2"},
                                    {"threaded", "#1f77b4"},
                                    {"prethreaded", "#17becf"},
                                    {"prethreaded-nolock", "#9edae5"},
                                    {"queue", "#ff7f0e"},
                                    {"poll", "#9467bd"},
                                    {"nginx", "#2ca02c"},
                                    {"spoold", "#d62728"}};
  return colour_in(colours, short_server_name(row_name));
}

}  // namespace bench
