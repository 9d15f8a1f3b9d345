#include "servers/failure_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace bench {

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

void report_failures(const char* who, const failure_log& log) {
  if (log.failures() + log.remarks() > 0)
    std::fprintf(stderr,
                 "spool-load-bench %s: %zu measurement(s) failed, %zu remark(s) (a server that "
                 "stopped badly, siege's errors); see the tables' notes\n",
                 who, log.failures(), log.remarks());
}

}  // namespace bench
