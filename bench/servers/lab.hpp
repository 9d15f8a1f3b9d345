// lab.hpp: what the server experiments (http, siege) share: finding programs, the open-file
// limit, the servers a run compares, and measurements that fail without ending the run.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "results.hpp"
#include "servers/running_server.hpp"

namespace bench {

bool is_executable(const std::string& path);
// Where the shell would find `program`, or "" if nowhere.
std::string on_path(const std::string& program);

// Load generators and servers hold one descriptor per connection: raises the soft open-file
// limit to the hard one (children inherit it) and warns, naming `who`, if that is still short
// of `connections` plus slack. Throws std::runtime_error if the limit cannot be read or set.
void raise_open_file_limit(std::uint64_t connections, const char* who);

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

// Footnote markers for a table: each distinct text gets "[1]", "[2]", ... once.
class footnotes {
 public:
  std::string mark(const std::string& text);  // "" for empty text
  void print(std::FILE* out) const;

 private:
  std::vector<std::string> texts_;
};

}  // namespace bench
