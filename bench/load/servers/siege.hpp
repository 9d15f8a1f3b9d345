// siege.hpp: the load generator of the producer-consumer thread-pool paper. One thread per
// simulated user; either a fixed number of requests per user (-r) or a fixed time (-t). Run
// with a configuration file written here (never the user's ~/.siege), its final figures read
// from its JSON summary (or, failing that, its text summary).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace bench {

struct siege_settings {
  std::string program = "siege";  // found on PATH
  std::string url;
  unsigned users = 10;             // -c
  unsigned reps = 0;               // -r N, or 0 for a timed run
  unsigned seconds = 0;            // -t Ns when reps is 0
  bool keep_alive = false;         // siege's default (and the paper's) is Connection: close
  unsigned socket_timeout_s = 30;  // the rc's `timeout`: siege's own default
  unsigned limit_seconds = 120;    // siege still running after this is killed
  std::string dir;                 // an existing directory for the rc file, HOME and siege's stderr
};

// The figures of siege's summary. Times in seconds, data in MB (siege's 2^20 bytes).
struct siege_result {
  std::uint64_t transactions = 0, successful = 0, failed = 0;
  double availability_pct = 0, elapsed_s = 0, data_mb = 0, response_time_s = 0;
  double transaction_rate = 0, throughput_mb_s = 0, concurrency = 0;
  double longest_s = 0, shortest_s = 0;
  double client_cpu_s = 0, wall_s = 0;  // siege's own CPU (wait4) and wall time, timed here
  std::string first_error;              // siege's first complaint on stderr, if any

  // The mean response time without the summary's two-decimal rounding: siege computes its
  // response time as total / transactions and its concurrency as total / elapsed, so this is
  // concurrency x elapsed / transactions (0 without transactions).
  double response_time_fine_s() const;
};

// The whole rc file: quiet, JSON summary, no logging, no HTML parser (one request per
// transaction, as wrk counts them), benchmark mode (no delay), `limit` at least the users.
std::string siege_config(const siege_settings& s);

// siege's JSON summary ({"transactions": 1000, ...}) or its text summary ("Transactions:
// 1000 hits" ...). nullopt, with `why`, if a figure is missing.
std::optional<siege_result> parse_siege_output(std::string_view text, std::string* why);

// A run of siege that produced no summary: what() has the details, reason() one line.
class siege_error : public std::runtime_error {
 public:
  siege_error(const std::string& what, std::string reason, bool hung = false)
      : std::runtime_error(what), reason_(std::move(reason)), hung_(hung) {}
  const std::string& reason() const { return reason_; }
  // Killed at limit_seconds. At the end of a timed run siege 4.0.7 cancels its user threads
  // asynchronously; one cancelled inside malloc dies holding an arena lock, and every other
  // thread then blocks on that lock as it exits (seen with gdb, a few runs in a hundred).
  bool hung() const { return hung_; }

 private:
  std::string reason_;
  bool hung_;
};

// Writes the rc file into s.dir, runs siege there (HOME=s.dir: a first run of siege writes a
// configuration template into $HOME/.siege) and reads its summary. Throws siege_error.
siege_result run_siege(const siege_settings& s);

// "SIEGE 4.0.7", or "" if siege cannot be run.
std::string siege_version(const std::string& program, const std::string& scratch_dir);

}  // namespace bench
