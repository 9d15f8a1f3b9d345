#include "servers/wrk.hpp"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "servers/child_process.hpp"

namespace bench {

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    lines.push_back(trimmed(text.substr(0, nl)));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A number at the start of `s` (after blanks); `s` is advanced past it.
std::optional<double> take_number(std::string_view& s) {
  s = trimmed(s);
  double v = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (error != std::errc()) return std::nullopt;
  s.remove_prefix(static_cast<std::size_t>(end - s.data()));
  return v;
}

std::optional<std::uint64_t> take_count(std::string_view& s) {
  s = trimmed(s);
  std::uint64_t v = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (error != std::errc()) return std::nullopt;
  s.remove_prefix(static_cast<std::size_t>(end - s.data()));
  return v;
}

// "connect 0, read 12, write 0, timeout 3": the count after `key`.
std::optional<std::uint64_t> count_after(std::string_view s, std::string_view key) {
  const auto at = s.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = s.substr(at + key.size());
  return take_count(rest);
}

// The first line that says something, for a one-line reason.
std::string first_line(std::string_view text) {
  for (std::string_view line : lines_of(text))
    if (!line.empty()) return std::string(line.substr(0, 160));
  return "(no output)";
}

}  // namespace

std::optional<double> wrk_duration_ms(std::string_view text) {
  std::string_view s = text;
  const auto v = take_number(s);
  if (!v) return std::nullopt;
  s = trimmed(s);
  if (s == "us") return *v / 1e3;
  if (s == "ms") return *v;
  if (s == "s") return *v * 1e3;
  if (s == "m") return *v * 60e3;
  if (s == "h") return *v * 3600e3;
  return std::nullopt;
}

std::optional<wrk_result> parse_wrk_output(std::string_view text, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<wrk_result> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  wrk_result r;
  bool have_rate = false, have_total = false, have_p50 = false, have_p99 = false;
  bool in_distribution = false;
  for (std::string_view line : lines_of(text)) {
    if (line == "Latency Distribution") {
      in_distribution = true;
      continue;
    }
    if (in_distribution) {
      // "50%    1.10ms"; the distribution ends at the first line that is not a percentile.
      const auto pct = line.find('%');
      if (pct == std::string_view::npos) {
        in_distribution = false;
      } else {
        const std::string_view which = line.substr(0, pct);
        const auto ms = wrk_duration_ms(line.substr(pct + 1));
        if (!ms) return fail("unreadable latency percentile '" + std::string(line) + "'");
        if (which == "50") r.p50_ms = *ms, have_p50 = true;
        if (which == "99") r.p99_ms = *ms, have_p99 = true;
        continue;
      }
    }
    if (starts_with(line, "Requests/sec:")) {
      std::string_view rest = line.substr(13);
      const auto v = take_number(rest);
      if (!v) return fail("unreadable '" + std::string(line) + "'");
      r.requests_per_s = *v;
      have_rate = true;
    } else if (line.find(" requests in ") != std::string_view::npos) {
      std::string_view rest = line;
      const auto n = take_count(rest);
      if (!n) return fail("unreadable '" + std::string(line) + "'");
      r.requests = *n;
      have_total = true;
    } else if (starts_with(line, "Socket errors:")) {
      const auto c = count_after(line, "connect"), rd = count_after(line, "read"),
                 w = count_after(line, "write"), t = count_after(line, "timeout");
      if (!c || !rd || !w || !t) return fail("unreadable '" + std::string(line) + "'");
      r.connect_errors = *c, r.read_errors = *rd, r.write_errors = *w, r.timeouts = *t;
    } else if (starts_with(line, "Non-2xx or 3xx responses:")) {
      std::string_view rest = line.substr(25);
      const auto n = take_count(rest);
      if (!n) return fail("unreadable '" + std::string(line) + "'");
      r.non_2xx_3xx = *n;
    }
  }
  if (!have_rate) return fail("no 'Requests/sec:' line");
  if (!have_total) return fail("no 'N requests in' line");
  if (!have_p50 || !have_p99) return fail("no 50% and 99% lines under 'Latency Distribution'");
  return r;
}

wrk_result run_wrk(const wrk_settings& s) {
  const unsigned threads = std::max(1u, std::min(s.threads, s.connections));
  std::vector<std::string> argv{s.program,
                                "-t",
                                std::to_string(threads),
                                "-c",
                                std::to_string(s.connections),
                                "-d",
                                std::to_string(s.seconds) + "s",
                                "--latency"};
  if (s.close_connections) argv.insert(argv.end(), {"-H", "Connection: close"});
  if (!s.script.empty()) argv.insert(argv.end(), {"-s", s.script});
  argv.push_back(s.url);

  std::string command;
  for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;

  const auto start = std::chrono::steady_clock::now();
  child_process wrk(child_process::launch{argv, "", true, true, ""});
  const auto deadline = start + std::chrono::seconds(s.seconds + s.slack_seconds);
  const std::optional<std::string> output = wrk.read_all(deadline);
  if (!output) {
    wrk.signal_group(SIGKILL);
    wrk.wait();
    const std::string why = "wrk still running " + std::to_string(s.slack_seconds) +
                            " s after its " + std::to_string(s.seconds) + " s: killed";
    throw wrk_error("`" + command + "`: " + why, why);
  }
  const exit_status status = wrk.wait();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok())
    throw wrk_error("`" + command + "` ended with " + status.describe() + ":\n" + *output,
                    "wrk " + status.describe() + ": " + first_line(*output));
  std::string why;
  auto r = parse_wrk_output(*output, &why);
  if (!r)
    throw wrk_error("`" + command + "`: " + why + " in its output:\n" + *output,
                    "wrk's report unreadable (" + why + ")");
  r->client_cpu_s = status.cpu_s;
  r->wall_s = wall;
  return *r;
}

}  // namespace bench
