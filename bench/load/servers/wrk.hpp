// wrk.hpp: the load generator. Runs wrk for a fixed time with its latency distribution on,
// and reads the figures from what it prints.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace bench {

struct wrk_settings {
  std::string program = "wrk";  // found on PATH
  std::string url;
  unsigned threads = 2;            // -t; wrk wants at most one thread per connection
  unsigned connections = 10;       // -c
  unsigned seconds = 10;           // -d; wrk takes whole seconds
  bool close_connections = false;  // -H "Connection: close": one request per connection
  std::string script;              // -s: a Lua script that makes the requests ("" for none)
  // wrk still running this long after its -d is killed (with everything it started), so that a
  // wedged load cannot hang a run.
  unsigned slack_seconds = 30;
};

struct wrk_result {
  double requests_per_s = 0;
  std::uint64_t requests = 0;
  double p50_ms = 0, p99_ms = 0;
  // "Socket errors: connect C, read R, write W, timeout T" (printed only when not all zero).
  std::uint64_t connect_errors = 0, read_errors = 0, write_errors = 0, timeouts = 0;
  std::uint64_t non_2xx_3xx = 0;  // "Non-2xx or 3xx responses: N"
  double client_cpu_s = 0;        // wrk's own CPU (user + system)
  double wall_s = 0;              // from start to exit, as timed here

  std::uint64_t errors() const {
    return connect_errors + read_errors + write_errors + timeouts + non_2xx_3xx;
  }
};

// wrk's report (with --latency). nullopt, with `why` set, if a figure it always prints is
// missing or unreadable.
std::optional<wrk_result> parse_wrk_output(std::string_view text, std::string* why);

// "1.23ms", "456.00us", "2.00s", "1.50m": wrk's durations, in milliseconds.
std::optional<double> wrk_duration_ms(std::string_view text);

// A run of wrk that produced no report: what() has the command and wrk's whole output,
// reason() one line for a table's footnote ("wrk: exit 1: unable to connect ...").
class wrk_error : public std::runtime_error {
 public:
  wrk_error(const std::string& what, std::string reason)
      : std::runtime_error(what), reason_(std::move(reason)) {}
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// Runs wrk and waits for it (at most -d plus slack_seconds). Throws wrk_error if it fails, is
// killed at that deadline, or its report cannot be read.
wrk_result run_wrk(const wrk_settings& s);

}  // namespace bench
