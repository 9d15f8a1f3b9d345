// lab.hpp: what the server experiments (http, siege) share: finding programs, the open-file
// limit, the servers a run compares and the checks before it, the steps of a measurement that
// fails without ending the run, and the tables it prints.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "harness.hpp"
#include "results.hpp"
#include "servers/running_server.hpp"

namespace bench {

// Where the experiments expect nginx (the distribution's package, scripts/install-deps.sh).
inline constexpr const char* nginx_binary = "/usr/sbin/nginx";

bool is_executable(const std::string& path);
// Where the shell would find `program`, or "" if nowhere.
std::string on_path(const std::string& program);

// Ends the run before (or between) measurements: "spool-bench WHO: WHAT" on stderr, exit 1.
[[noreturn]] void cannot_run(const char* who, const std::string& what);

// Load generators and servers hold one descriptor per connection: raises the soft open-file
// limit to the hard one (children inherit it) and warns, naming `who`, if that is still short
// of `connections` plus slack. Ends the run (cannot_run) if the limit cannot be read or set.
void raise_open_file_limit(std::uint64_t connections, const char* who);

// Measurements per point: --repeat, except that the smoke test's --tiny means one.
int repeat_count(const options& o);

// The spoold to start: --spoold, else the one built beside spool-bench ("" if none was).
std::string spoold_binary(const options& o);
// What the servers serve: --root (default: the repository's server/site) and the URL path
// requested, --file (default /index.html).
std::string served_root(const options& o);
std::string served_url_path(const options& o);

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

// What would make a run fail half-way, checked before the first server starts: every server in
// `servers` ("spoold", "nginx") present, and `url_path` there to serve under `root` (or the
// guestbook, with spoold alone). Ends the run through cannot_run(who, ...) if not. The load
// generator is the experiment's own to check, first.
void check_servers(const options& o, const std::vector<std::string>& servers,
                   const std::string& root, const std::string& url_path, const char* who);

// The servers of a run, in the order of `servers`: nginx, and for "spoold" one per variant in
// `spoold_variants` (spoold_kind), each given `spoold_args`.
std::vector<server_kind> server_kinds(const options& o, const std::vector<std::string>& servers,
                                      const std::string& root,
                                      const std::vector<std::string>& spoold_variants,
                                      const std::vector<std::string>& spoold_args);

// The first non-empty line of `text`, cut to `max` characters: a one-line reason.
std::string first_line(std::string_view text, std::size_t max = 200);

// spoold as one server of a comparison: "spoold" for its default model (variant ""), else
// "spoold (VARIANT)" with the variant's --model and options (servers/spoold.hpp).
// `extra_args` go after them (--max-connections).
server_kind spoold_kind(const std::string& binary, const std::string& root,
                        const std::string& variant, const std::vector<std::string>& extra_args);
// nginx with one worker per online CPU, serving `root`.
server_kind nginx_kind(const std::string& binary, const std::string& root);
// The variant in a row name: "spoold (queue)" gives "queue", anything else itself ("nginx",
// "spoold").
std::string short_server_name(const std::string& row_name);
// A fixed colour per server row ("#rrggbb"), distinct for every spoold model.
std::string server_colour(const std::string& row_name);

// A measurement that could not be taken (the server did not start, the load generator failed,
// nothing was answered). what() is one line for a footnote; the details went to stderr.
class point_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What went wrong at which points of a run, for footnotes and for the rows themselves. A failed
// measurement is a sample whose value is NaN (failed_sample()); settle() takes those out of the
// rows after the ratios are computed.
class failure_log {
 public:
  static sample failed_sample();
  void fail(const std::string& variant, const std::string& peer, unsigned threads,
            const std::string& reason);
  // Something worth a footnote about a measurement that was kept ("stopped with exit 1").
  void remark(const std::string& variant, const std::string& peer, unsigned threads,
              const std::string& text);

  // Removes failed samples from `rows`. A row left with none gets not_available = "failed:
  // REASON"; one that lost some gets the extra "failed_repeats" (the count) on the rest.
  void settle(std::vector<row>& rows) const;
  // Failed measurements, and remarks, so far over all points.
  std::size_t failures() const;
  std::size_t remarks() const;
  // The failures and remarks at a point, distinct, in order: "" if none.
  std::string notes(const std::string& variant, const std::string& peer, unsigned threads) const;

 private:
  static std::string key(const std::string& variant, const std::string& peer, unsigned threads);
  std::map<std::string, std::vector<std::string>> failures_, remarks_;
};

// The steps of a measurement that every experiment takes alike. `who` names the experiment in
// progress lines, `variant` the point and `server` the row (server_kind::name).

// A stage of a measurement failed: says so on stderr, with the whole of `e`'s message (up to
// 4000 characters); the caller then throws the point's failure with a one-line reason.
void report_stage_failure(const char* who, const std::string& variant, const std::string& server,
                          const std::string& stage, const std::exception& e);
// A fresh server of `kind`, checked with one GET of `url_path` (status 200 and `expected`).
// Throws point_failure ("start: REASON" or "probe GET: REASON") after report_stage_failure.
std::unique_ptr<running_server> start_probed(const char* who, const std::string& variant,
                                             const server_kind& kind, const std::string& url_path,
                                             const expected_answer& expected);

// Stops `server` gracefully. A stop that fails leaves the figures standing: its details go to
// stderr and a remark "stop: REASON" to `log` at (variant, server, threads).
void stop_with_remark(running_server& server, const char* who, const std::string& variant,
                      const std::string& server_name, unsigned threads, failure_log& log);

// The contenders of a point for measure_point, one per server of `servers` (which, like `log`,
// must outlive them): each runs `measure` on its server. A measurement that throws
// (point_failure, or anything else that went wrong at this point only, such as a temporary
// directory that could not be made) gives a progress line, the failure in `log` at (variant,
// server, threads) and failure_log::failed_sample(): the run goes on.
std::vector<contender> server_contenders(const char* who, const std::string& variant,
                                         const std::vector<server_kind>& servers, unsigned threads,
                                         failure_log& log,
                                         std::function<sample(const server_kind&)> measure);
// After a run: the line the smoke tests fail on (CTest FAIL_REGULAR_EXPRESSION) if any
// measurement failed or was remarked on; a full run goes on.
void report_failures(const char* who, const failure_log& log);

// Footnote markers for a table: each distinct text gets "[1]", "[2]", ... once.
class footnotes {
 public:
  std::string mark(const std::string& text);  // "" for empty text
  void print(std::FILE* out) const;

 private:
  std::vector<std::string> texts_;
};

// The head of a run's output: `head` ("# http:     ..."), the servers' names, and the file served.
void print_run_head(const std::string& head, const std::vector<server_kind>& servers,
                    const std::string& root, const std::string& url_path,
                    const expected_answer& expected);

// `v` with `decimals` digits after the point.
std::string fixed(double v, int decimals);
// Prints `cells` (the first line the head) as columns two blanks apart: the columns in `left`
// are text (names, ranges) and left-aligned, the rest right-aligned.
void print_cells(const std::vector<std::vector<std::string>>& cells,
                 const std::vector<std::size_t>& left);
// The row of `experiment` at (variant, peer, threads), or nullptr.
const row* find_row(const results& res, const std::string& experiment, const std::string& variant,
                    const std::string& peer, unsigned threads);

}  // namespace bench
