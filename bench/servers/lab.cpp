#include "servers/lab.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "process_stats.hpp"
#include "servers/http_probe.hpp"
#include "servers/nginx.hpp"
#include "servers/spoold.hpp"

namespace bench {

namespace {

#ifdef SPOOL_BENCH_SPOOLD
constexpr const char* built_spoold = SPOOL_BENCH_SPOOLD;  // $<TARGET_FILE:spoold>
#else
constexpr const char* built_spoold = "";
#endif
#ifdef SPOOL_BENCH_SITE
constexpr const char* repository_site = SPOOL_BENCH_SITE;  // the repository's server/site
#else
constexpr const char* repository_site = "";
#endif

}  // namespace

bool is_executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, colon - start) + "/" + program;
    if (colon > start && is_executable(candidate)) return candidate;
    start = colon + 1;
  }
  return "";
}

[[noreturn]] void cannot_run(const char* who, const std::string& what) {
  std::fprintf(stderr, "spool-bench %s: %s\n", who, what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

void raise_open_file_limit(std::uint64_t connections, const char* who) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
    cannot_run(who, std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
      cannot_run(who, std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < connections + 100)
    std::fprintf(stderr,
                 "spool-bench %s: warning: the open-file limit (%llu) is below %llu "
                 "connections plus slack; expect connect errors (raise `ulimit -Hn`)\n",
                 who, static_cast<unsigned long long>(lim.rlim_cur),
                 static_cast<unsigned long long>(connections));
}

int repeat_count(const options& o) {
  return o.size == size_mode::tiny && !o.repeat_given ? 1 : o.repeat_time_bound();
}

std::string spoold_binary(const options& o) {
  return o.spoold_path.empty() ? built_spoold : o.spoold_path;
}

std::string served_root(const options& o) {
  return o.site_root.empty() ? repository_site : o.site_root;
}

std::string served_url_path(const options& o) {
  return o.url_path.empty() ? "/index.html" : o.url_path;
}

bool is_guestbook(const std::string& url_path) { return url_path == guestbook_path; }

expected_answer expected_at(const std::string& root, const std::string& url_path) {
  if (is_guestbook(url_path)) return {"<title>Guestbook</title>", true};
  return {read_file(root + url_path), false};
}

void check_servers(const options& o, const std::vector<std::string>& servers,
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
      cannot_run(who, "this spool-bench was built without spoold: pass --spoold PATH");
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

std::vector<server_kind> server_kinds(const options& o, const std::vector<std::string>& servers,
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

std::string first_line(std::string_view text, std::size_t max) {
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (!line.empty())
      return line.size() > max ? std::string(line.substr(0, max)) + "..." : std::string(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return "(no message)";
}

server_kind spoold_kind(const std::string& binary, const std::string& root,
                        const std::string& variant, const std::vector<std::string>& extra_args) {
  spoold_settings s{binary, root, "", extra_args};
  if (!variant.empty()) {
    const spoold_variant v = spoold_variant_of(variant);
    s.model = v.model;
    s.extra_args = v.extra_args;
    s.extra_args.insert(s.extra_args.end(), extra_args.begin(), extra_args.end());
  }
  return {variant.empty() ? "spoold" : "spoold (" + variant + ")", [s] { return start_spoold(s); }};
}

server_kind nginx_kind(const std::string& binary, const std::string& root) {
  nginx_settings s;
  s.binary = binary;
  s.root = root;
  s.workers = online_cpus();  // as many as spoold's event loops (its --loops default)
  return {"nginx", [s] { return start_nginx(s); }};
}

std::string short_server_name(const std::string& row_name) {
  const std::string prefix = "spoold (";
  if (row_name.rfind(prefix, 0) == 0 && row_name.back() == ')')
    return row_name.substr(prefix.size(), row_name.size() - prefix.size() - 1);
  return row_name;
}

std::string server_colour(const std::string& row_name) {
  // Models in the order of the ZeroHTTPd table, from slow classics to the event loops; nginx
  // and the default (epoll) keep the colours the other charts give them.
  static const std::pair<const char*, const char*> colours[] = {{"epoll", "#d62728"},
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
  const std::string name = short_server_name(row_name);
  for (const auto& [n, colour] : colours)
    if (name == n) return colour;
  return "#bcbd22";
}

sample failure_log::failed_sample() { return {NAN, {}}; }

std::string failure_log::key(const std::string& variant, const std::string& peer,
                             unsigned threads) {
  return variant + '\n' + peer + '\n' + std::to_string(threads);
}

void failure_log::fail(const std::string& variant, const std::string& peer, unsigned threads,
                       const std::string& reason) {
  failures_[key(variant, peer, threads)].push_back(reason);
}

void failure_log::remark(const std::string& variant, const std::string& peer, unsigned threads,
                         const std::string& text) {
  remarks_[key(variant, peer, threads)].push_back(text);
}

namespace {

// "a; b" from the distinct entries, in the order first seen.
std::string distinct_joined(const std::vector<std::string>& texts) {
  std::vector<std::string> seen;
  std::string out;
  for (const std::string& t : texts) {
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    out += (out.empty() ? "" : "; ") + t;
  }
  return out;
}

}  // namespace

void failure_log::settle(std::vector<row>& rows) const {
  for (row& r : rows) {
    const auto before = r.samples.size();
    std::erase_if(r.samples, [](const sample& s) { return std::isnan(s.value); });
    const auto failed = before - r.samples.size();
    if (failed == 0) continue;
    const auto it = failures_.find(key(r.variant, r.peer, r.threads));
    const std::string why = it == failures_.end() ? "unknown" : distinct_joined(it->second);
    if (r.samples.empty()) {
      r.not_available = "failed: " + why;
      continue;
    }
    for (sample& s : r.samples) s.extras.emplace_back("failed_repeats", double(failed));
  }
}

std::size_t failure_log::failures() const {
  std::size_t n = 0;
  for (const auto& [point, reasons] : failures_) n += reasons.size();
  return n;
}

std::size_t failure_log::remarks() const {
  std::size_t n = 0;
  for (const auto& [point, texts] : remarks_) n += texts.size();
  return n;
}

std::string failure_log::notes(const std::string& variant, const std::string& peer,
                               unsigned threads) const {
  std::vector<std::string> all;
  const std::string k = key(variant, peer, threads);
  if (const auto it = failures_.find(k); it != failures_.end()) {
    const std::size_t n = it->second.size();
    all.push_back("failed" + (n > 1 ? " in " + std::to_string(n) + " repeats" : std::string()) +
                  ": " + distinct_joined(it->second));
  }
  if (const auto it = remarks_.find(k); it != remarks_.end())
    all.push_back(distinct_joined(it->second));
  return distinct_joined(all);
}

void report_stage_failure(const char* who, const std::string& variant, const std::string& server,
                          const std::string& stage, const std::exception& e) {
  progress("%s %s on %s: %s failed; details:", who, variant.c_str(), server.c_str(), stage.c_str());
  std::fprintf(stderr, "%.4000s\n", e.what());
}

std::unique_ptr<running_server> start_probed(const char* who, const std::string& variant,
                                             const server_kind& kind, const std::string& url_path,
                                             const expected_answer& expected) {
  // Neither stage throws a load generator's error: the reason is the message's first line.
  const auto give_up = [&](const std::string& stage, const std::exception& e) {
    report_stage_failure(who, variant, kind.name, stage, e);
    return point_failure(stage + ": " + first_line(e.what()));
  };
  std::unique_ptr<running_server> server;  // killed (its whole group) if we leave early
  try {
    server = kind.start();
  } catch (const std::exception& e) {
    throw give_up("start", e);
  }
  try {
    if (expected.page) {
      expect_page_served(server->port(), url_path, expected.text);
    } else {
      expect_file_served(server->port(), url_path, expected.text);
    }
  } catch (const std::exception& e) {
    throw give_up("probe GET", e);
  }
  return server;
}

void stop_with_remark(running_server& server, const char* who, const std::string& variant,
                      const std::string& server_name, unsigned threads, failure_log& log) {
  try {
    server.stop();
  } catch (const std::exception& e) {
    progress("%s %s on %s: stop failed; details:", who, variant.c_str(), server_name.c_str());
    std::fprintf(stderr, "%.4000s\n", e.what());
    log.remark(variant, server_name, threads, "stop: " + first_line(e.what()));
  }
}

std::vector<contender> server_contenders(const char* who, const std::string& variant,
                                         const std::vector<server_kind>& servers, unsigned threads,
                                         failure_log& log,
                                         std::function<sample(const server_kind&)> measure) {
  std::vector<contender> cs;
  for (const server_kind& k : servers) {
    cs.push_back({variant, k.name, {}, [who, variant, &k, threads, &log, measure] {
                    try {
                      return measure(k);
                    } catch (const std::exception& e) {
                      progress("%s %s on %s: failed: %s", who, variant.c_str(), k.name.c_str(),
                               first_line(e.what(), 300).c_str());
                      log.fail(variant, k.name, threads, first_line(e.what(), 300));
                      return failure_log::failed_sample();
                    }
                  }});
    // A measurement records its failures and remarks in `log`, which a child process's copy
    // would lose; and a child would isolate nothing: the servers and the load generator are
    // processes of their own, and no peer's runtime runs in spool-bench here.
    cs.back().in_process = true;
  }
  return cs;
}

void report_failures(const char* who, const failure_log& log) {
  if (log.failures() + log.remarks() > 0)
    std::fprintf(stderr,
                 "spool-bench %s: %zu measurement(s) failed, %zu remark(s) (a server that "
                 "stopped badly, siege's errors); see the tables' notes\n",
                 who, log.failures(), log.remarks());
}

std::string footnotes::mark(const std::string& text) {
  if (text.empty()) return "";
  auto it = std::find(texts_.begin(), texts_.end(), text);
  if (it == texts_.end()) it = texts_.insert(texts_.end(), text);
  return "[" + std::to_string(it - texts_.begin() + 1) + "]";
}

void footnotes::print(std::FILE* out) const {
  for (std::size_t i = 0; i < texts_.size(); ++i)
    std::fprintf(out, "   [%zu] %s\n", i + 1, texts_[i].c_str());
}

void print_run_head(const std::string& head, const std::vector<server_kind>& servers,
                    const std::string& root, const std::string& url_path,
                    const expected_answer& expected) {
  std::string line = head + "; servers:";
  for (const server_kind& k : servers) line += " " + k.name;
  if (expected.page) {
    std::printf("%s\n# serving:  %s, spoold's guestbook page (a SQLite store visit per request)\n",
                line.c_str(), url_path.c_str());
  } else {
    std::printf("%s\n# serving:  %s%s (%zu bytes)\n", line.c_str(), root.c_str(),
                url_path.c_str(), expected.text.size());
  }
}

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void print_cells(const std::vector<std::vector<std::string>>& cells,
                 const std::vector<std::size_t>& left) {
  std::vector<std::size_t> width(cells[0].size(), 0);
  for (const auto& line : cells)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  for (const auto& line : cells) {
    std::string text;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const bool is_left = std::find(left.begin(), left.end(), i) != left.end();
      const std::string pad(width[i] - line[i].size(), ' ');
      text += (is_left ? line[i] + pad : pad + line[i]) + "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    std::printf("%s\n", text.c_str());
  }
}

const row* find_row(const results& res, const std::string& experiment, const std::string& variant,
                    const std::string& peer, unsigned threads) {
  for (const row& r : res.rows())
    if (r.experiment == experiment && r.variant == variant && r.peer == peer &&
        r.threads == threads)
      return &r;
  return nullptr;
}

}  // namespace bench
