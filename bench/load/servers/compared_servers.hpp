// compared_servers.hpp: the servers a run compares (nginx, and spoold once per model), what
// is checked before the first one starts, and the colour each is drawn in.
#pragma once

#include <string>
#include <vector>

#include "load_options.hpp"
#include "servers/running_server.hpp"
#include "servers/served_content.hpp"

namespace bench {

// The spoold to start: --spoold, else the one built beside spool-load-bench ("" if none was).
std::string spoold_binary(const load_options& o);

// What would make a run fail half-way, checked before the first server starts: every server in
// `servers` ("spoold", "nginx") present, and `url_path` there to serve under `root` (or the
// guestbook, with spoold alone). Ends the run through cannot_run(who, ...) if not. The load
// generator is the experiment's own to check, first.
void check_servers(const load_options& o, const std::vector<std::string>& servers,
                   const std::string& root, const std::string& url_path, const char* who);

// What the run serves (--root, --file), once check_servers has found it there to serve, with
// the answer a probe expects.
served_content checked_content(const load_options& o, const std::vector<std::string>& servers,
                               const char* who);

// The servers of a run, in the order of `servers`: nginx, and for "spoold" one per variant in
// `spoold_variants` (spoold_kind), each given `spoold_args`.
std::vector<server_kind> server_kinds(const load_options& o,
                                      const std::vector<std::string>& servers,
                                      const std::string& root,
                                      const std::vector<std::string>& spoold_variants,
                                      const std::vector<std::string>& spoold_args);

// A fixed colour per server row ("#rrggbb"), distinct for every spoold model.
std::string server_colour(const std::string& row_name);

}  // namespace bench
