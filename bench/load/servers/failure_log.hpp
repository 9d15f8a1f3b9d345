// failure_log.hpp: a server measurement that fails does not end the run: its one-line reason
// is kept for the tables' footnotes, its sample is taken out of the rows, and the end of the
// run says how many failed.
#pragma once

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "results.hpp"

namespace bench {

// The first non-empty line of `text`, cut to `max` characters: a one-line reason.
std::string first_line(std::string_view text, std::size_t max = 200);

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

// After a run: the line the smoke tests fail on (CTest FAIL_REGULAR_EXPRESSION) if any
// measurement failed or was remarked on; a full run goes on.
void report_failures(const char* who, const failure_log& log);

}  // namespace bench
