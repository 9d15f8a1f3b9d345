#include "servers/siege.hpp"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <vector>

#include "servers/child_process.hpp"
#include "servers/failure_log.hpp"
#include "servers/temp_dir.hpp"

namespace bench {

namespace {

// One figure of the summary: its JSON key and its label in the text form.
struct field {
  std::string_view json, text;
  double siege_result::*real = nullptr;
  std::uint64_t siege_result::*count = nullptr;
};

const field fields[] = {
    {"transactions", "Transactions:", nullptr, &siege_result::transactions},
    {"availability", "Availability:", &siege_result::availability_pct, nullptr},
    {"elapsed_time", "Elapsed time:", &siege_result::elapsed_s, nullptr},
    {"data_transferred", "Data transferred:", &siege_result::data_mb, nullptr},
    {"response_time", "Response time:", &siege_result::response_time_s, nullptr},
    {"transaction_rate", "Transaction rate:", &siege_result::transaction_rate, nullptr},
    {"throughput", "Throughput:", &siege_result::throughput_mb_s, nullptr},
    {"concurrency", "Concurrency:", &siege_result::concurrency, nullptr},
    {"successful_transactions", "Successful transactions:", nullptr, &siege_result::successful},
    {"failed_transactions", "Failed transactions:", nullptr, &siege_result::failed},
    {"longest_transaction", "Longest transaction:", &siege_result::longest_s, nullptr},
    {"shortest_transaction", "Shortest transaction:", &siege_result::shortest_s, nullptr},
};

// The number after `at` (blanks, tabs and one ':' skipped); nullopt if there is none.
std::optional<double> number_after(std::string_view text, std::size_t at) {
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == ':')) ++at;
  double v = 0;
  const auto [end, error] = std::from_chars(text.data() + at, text.data() + text.size(), v);
  if (error != std::errc() || end == text.data() + at) return std::nullopt;
  return v;
}

bool store(siege_result& r, const field& f, double v) {
  if (f.real) {
    r.*f.real = v;
    return true;
  }
  if (v < 0) return false;
  r.*f.count = static_cast<std::uint64_t>(v);
  return true;
}

}  // namespace

double siege_result::response_time_fine_s() const {
  return transactions == 0 ? 0 : concurrency * elapsed_s / static_cast<double>(transactions);
}

std::string siege_config(const siege_settings& s) {
  // siege's defaults except what a benchmark run needs: no per-request lines, no log file, no
  // colour codes in its errors, a JSON summary, no HTML parser (with it, siege would also fetch
  // what the page links to and count those as transactions), no delay between a user's
  // requests, and a thread limit above the users. `failures` is raised so that a server that
  // refuses or drops connections is measured to the end (siege's default aborts after 1024).
  std::string c = "# written by spool-load-bench for one run\n";
  c += "verbose = false\n";
  c += "quiet = true\n";
  c += "color = off\n";
  c += "json_output = true\n";
  c += "show-logfile = false\n";
  c += "logging = false\n";
  c += "parser = false\n";
  c += "limit = " + std::to_string(std::max(1000u, s.users)) + "\n";
  c += "protocol = HTTP/1.1\n";
  c += "chunked = true\n";
  c += "cache = false\n";
  c += std::string("connection = ") + (s.keep_alive ? "keep-alive" : "close") + "\n";
  c += "benchmark = true\n";
  c += "delay = 0\n";
  c += "internet = false\n";
  c += "timeout = " + std::to_string(s.socket_timeout_s) + "\n";
  c += "failures = 1000000000\n";
  return c;
}

std::optional<siege_result> parse_siege_output(std::string_view text, std::string* why) {
  siege_result r;
  // The JSON summary is one flat object; anything siege printed before it (the note about a
  // new configuration template) is skipped.
  const bool json = text.find("\"transactions\"") != std::string_view::npos;
  for (const field& f : fields) {
    std::optional<double> v;
    if (json) {
      const std::string key = "\"" + std::string(f.json) + "\"";
      const auto at = text.find(key);
      if (at != std::string_view::npos) v = number_after(text, at + key.size());
    } else {
      // "Transactions:		        1000 hits": at the start of a line.
      for (std::size_t at = text.find(f.text); at != std::string_view::npos;
           at = text.find(f.text, at + 1)) {
        if (at == 0 || text[at - 1] == '\n') {
          v = number_after(text, at + f.text.size());
          break;
        }
      }
    }
    if (!v || !store(r, f, *v)) {
      if (why) *why = "no readable '" + std::string(json ? f.json : f.text) + "' in its summary";
      return std::nullopt;
    }
  }
  return r;
}

siege_result run_siege(const siege_settings& s) {
  const std::string rc = s.dir + "/siegerc";
  write_file(rc, siege_config(s));
  std::vector<std::string> argv{s.program, "-R", rc, "-c", std::to_string(s.users)};
  if (s.reps > 0)
    argv.insert(argv.end(), {"-r", std::to_string(s.reps)});
  else
    argv.insert(argv.end(), {"-t", std::to_string(s.seconds) + "S"});
  argv.push_back(s.url);
  std::string command;
  for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;

  // stderr to a file: a refusing server makes siege print a line per failed request, which
  // would otherwise bury the summary on stdout.
  const std::string errors = s.dir + "/siege-stderr.log";
  const auto start = std::chrono::steady_clock::now();
  // MALLOC_ARENA_MAX: an arena per thread. A user thread that siege's asynchronous cancel
  // catches inside malloc then leaves only its own arena locked, and the others exit past it
  // (siege_error::hung; 1 hang in 65 timed runs with it here, 7 in 65 without).
  child_process siege(child_process::launch{
      argv, s.dir, true, false, errors, {"HOME=" + s.dir, "MALLOC_ARENA_MAX=4096"}});
  const std::optional<std::string> output =
      siege.read_all(start + std::chrono::seconds(s.limit_seconds));
  if (!output) {
    siege.signal_group(SIGKILL);
    siege.wait();
    const std::string why =
        "siege still running after " + std::to_string(s.limit_seconds) + " s: killed";
    throw siege_error("`" + command + "`: " + why, why, true);
  }
  const exit_status status = siege.wait();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string complaints = read_file(errors);
  const std::string first_error = complaints.empty() ? "" : first_line(complaints);
  if (!status.ok())
    throw siege_error(
        "`" + command + "` ended with " + status.describe() + ":\n" + *output +
            complaints.substr(0, 4000),
        "siege " + status.describe() + (first_error.empty() ? "" : ": " + first_error));
  std::string why;
  auto r = parse_siege_output(*output, &why);
  if (!r)
    throw siege_error("`" + command + "`: " + why + ":\n" + *output + complaints.substr(0, 4000),
                      "siege's summary unreadable (" + why + ")");
  r->client_cpu_s = status.cpu_s;
  r->wall_s = wall;
  r->first_error = first_error;
  return *r;
}

std::string siege_version(const std::string& program, const std::string& scratch_dir) {
  try {
    child_process child(
        {{program, "--version"}, scratch_dir, true, true, "", {"HOME=" + scratch_dir}});
    const std::string text = child.read_all();
    child.wait();
    // "SIEGE 4.0.7" is printed twice (stdout and stderr); after a template note on a first run.
    for (std::string_view rest = text; !rest.empty();) {
      const auto nl = rest.find('\n');
      const std::string_view line = rest.substr(0, nl);
      if (line.rfind("SIEGE ", 0) == 0) return std::string(line);
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
    return "";
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace bench
