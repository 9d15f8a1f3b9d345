#include "options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "peers/peer_names.hpp"

namespace bench {

namespace {

[[noreturn]] void usage_error(const options& o, const std::string& what) {
  std::fprintf(stderr, "spool-bench %s: %s (see spool-bench %s --help)\n", o.subcommand.c_str(),
               what.c_str(), o.subcommand.c_str());
  std::exit(2);
}

double parse_number(const options& o, std::string_view flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0)
    usage_error(o, std::string(flag) + " wants a non-negative number, not '" + text + "'");
  return v;
}

std::uint64_t parse_count(const options& o, std::string_view flag, const std::string& text) {
  const double v = parse_number(o, flag, text);  // accepts 1e8 as well as 100000000
  if (v != std::floor(v) || v > 1e18)
    usage_error(o, std::string(flag) + " wants a whole number, not '" + text + "'");
  return static_cast<std::uint64_t>(v);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

std::string quoted(const char* arg) {
  std::string s = arg;
  if (!s.empty() && s.find_first_of(" \t\"'$\\") == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void apply_param(options& o, std::string_view flag, const std::string& value) {
  if (flag == "--n") {
    for (const std::string& part : split(value)) o.n.push_back(parse_count(o, flag, part));
  } else if (flag == "--cutoff") {
    o.cutoff = parse_count(o, flag, value);
  } else if (flag == "--tasks") {
    o.tasks = parse_count(o, flag, value);
  } else if (flag == "--rate") {
    o.rate = parse_number(o, flag, value);
  } else if (flag == "--recv-rate") {
    o.recv_rate = parse_number(o, flag, value);
  } else if (flag == "--duration") {
    o.duration_s = parse_number(o, flag, value);
  } else if (flag == "--probe") {
    o.probe_s = parse_number(o, flag, value);
  } else if (flag == "--long-ms") {
    o.long_ms = parse_number(o, flag, value);
  } else if (flag == "--short-ms") {
    o.short_ms = parse_number(o, flag, value);
  } else if (flag == "--ticks") {
    for (const std::string& part : split(value)) o.ticks_ms.push_back(parse_number(o, flag, part));
  } else if (flag == "--io-ms") {
    o.io_ms = parse_number(o, flag, value);
  } else if (flag == "--io-ratio") {
    o.io_ratio = parse_number(o, flag, value);
    if (*o.io_ratio > 1) usage_error(o, "--io-ratio wants a fraction in 0..1");
  } else if (flag == "--keep-alive-ms") {
    o.keep_alive_ms = parse_number(o, flag, value);
  } else if (flag == "--max-threads") {
    o.pool_max_threads = parse_count(o, flag, value);
    if (*o.pool_max_threads < 1 || *o.pool_max_threads > 4096)
      usage_error(o, "--max-threads wants a count in 1..4096");
  } else if (flag == "--primes-below") {
    o.primes_below = parse_count(o, flag, value);
    if (*o.primes_below > 100'000'000) usage_error(o, "--primes-below wants at most 1e8");
  } else if (flag == "--trace") {
    if (value.empty()) usage_error(o, "--trace needs a file name");
    o.trace_file = value;
  } else if (flag == "--concurrency") {
    o.concurrency.clear();
    for (const std::string& part : split(value)) {
      o.concurrency.push_back(parse_count(o, flag, part));
      if (o.concurrency.back() < 1 || o.concurrency.back() > 1'000'000)
        usage_error(o, "--concurrency wants counts in 1..1000000");
    }
  } else if (flag == "--connection") {
    o.connection_modes = split(value);
    for (const std::string& m : o.connection_modes)
      if (m != "keepalive" && m != "close")
        usage_error(o, "--connection wants keepalive and/or close, not '" + m + "'");
  } else if (flag == "--balancers") {
    o.balancers = split(value);
    for (const std::string& name : o.balancers)
      if (name != "haproxy" && name != "nginx")
        usage_error(o, "--balancers wants haproxy and/or nginx, not '" + name + "'");
  } else if (flag == "--servers") {
    o.servers = split(value);
    for (const std::string& name : o.servers)
      if (name != "spoold" && name != "nginx")
        usage_error(o, "--servers wants spoold and/or nginx, not '" + name + "'");
  } else if (flag == "--models") {
    o.spoold_models = split(value);
    for (const std::string& m : o.spoold_models)
      if (m.empty()) usage_error(o, "--models wants spoold model names, e.g. epoll");
  } else if (flag == "--spoold" || flag == "--root") {
    if (value.empty()) usage_error(o, std::string(flag) + " needs a path");
    (flag == "--spoold" ? o.spoold_path : o.site_root) = value;
  } else if (flag == "--reps") {
    o.reps = parse_count(o, flag, value);
    if (*o.reps < 1 || *o.reps > 1'000'000) usage_error(o, "--reps wants a count in 1..1000000");
  } else if (flag == "--forms") {
    o.siege_forms = split(value);
    for (const std::string& f : o.siege_forms)
      if (f != "reps" && f != "time")
        usage_error(o, "--forms wants reps and/or time, not '" + f + "'");
  } else if (flag == "--original") {
    if (value != "iterative" && value != "threaded")
      usage_error(o, "--original wants iterative or threaded, not '" + value + "'");
    o.original_model = value;
  } else if (flag == "--nodes") {
    o.fleet_nodes.clear();
    for (const std::string& part : split(value)) {
      o.fleet_nodes.push_back(parse_count(o, flag, part));
      if (o.fleet_nodes.back() < 1 || o.fleet_nodes.back() > 9)
        usage_error(o, "--nodes wants counts in 1..9");
    }
  } else if (flag == "--failovers") {
    o.failovers = parse_count(o, flag, value);
    if (*o.failovers > 100) usage_error(o, "--failovers wants a count in 0..100");
  } else if (flag == "--store") {
    if (value.empty()) usage_error(o, "--store wants redis or a spoold --store spec");
    o.store_spec = value;
  } else if (flag == "--file") {
    if (value.empty() || value.front() != '/')
      usage_error(o, "--file wants a URL path starting with '/', not '" + value + "'");
    o.url_path = value;
  }
}

void print_experiment_help(const experiment& e) {
  std::printf("usage: spool-bench %.*s [options]\n\n%.*s\n\n%.*s\n",
              static_cast<int>(e.name.size()), e.name.data(), static_cast<int>(e.summary.size()),
              e.summary.data(), static_cast<int>(e.help.size()), e.help.data());
  print_common_help(stdout);
}

}  // namespace

bool options::wants_peer(std::string_view name) const {
  return peers.empty() || std::find(peers.begin(), peers.end(), name) != peers.end();
}

unsigned options::max_threads() const { return *std::max_element(threads.begin(), threads.end()); }

int options::repeat_time_bound() const {
  return size == size_mode::quick && !repeat_given ? std::min(repeat, 3) : repeat;
}

void print_common_help(std::FILE* out) {
  std::fprintf(
      out,
      "\ncommon options:\n"
      "  --repeat N       runs per point, interleaved across peers (default 5; under --quick\n"
      "                   pc and idle run 3 times unless --repeat is given)\n"
      "  --threads LIST   pool sizes to measure, e.g. 2,4,8,16 (default 2)\n"
      "  --peers LIST     subset of %s (default all)\n"
      "  --quick          smaller sizes: `spool-bench all --quick` takes under 5 minutes on 2 "
      "cores\n"
      "  --tiny           minimal sizes, for the smoke test (figures are meaningless)\n"
      "  --spin-rounds N  spool's config::spin_rounds (default: the library's, 64): how long\n"
      "                   idle workers and waiting threads poll before they sleep; 0 sleeps at\n"
      "                   once (the low-CPU setting)\n"
      "  --defer-period US  spool's config::defer_period in microseconds (default: the\n"
      "                   library's, 1000): how a crowded pool's timed sleeper checks on\n"
      "                   deferred wake-ups; 0 turns deferral off\n"
      "  --same-process   run every measurement in spool-bench's own process (for gdb and\n"
      "                   perf, and to compare). By default each runs in a child process of\n"
      "                   its own, so that the worker threads oneTBB and OpenMP keep for the\n"
      "                   life of a process cannot slow down the contenders measured after\n"
      "                   them\n"
      "  --out FILE       also write the results to FILE, as CSV or JSON by its extension\n"
      "  --plot FILE.png  bar chart of the medians through gnuplot; or a directory (ending in\n"
      "                   / or existing): DIR/EXPERIMENT.png; for `all`, a directory or a\n"
      "                   prefix, one PNG per experiment\n"
      "  --help           this text\n",
      peer_list().c_str());
}

options parse_options(int argc, char** argv, const experiment* exp) {
  options o;
  o.subcommand = argc > 1 ? argv[1] : "";
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + quoted(argv[i]);

  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i], value;
    bool has_inline_value = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
      has_inline_value = true;
    }
    auto take_value = [&]() -> std::string {
      if (has_inline_value) return value;
      if (i + 1 >= argc) usage_error(o, flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--help" || flag == "-h") {
      if (exp) {
        print_experiment_help(*exp);
      } else {
        std::printf("usage: spool-bench all [options]: every experiment in turn\n");
        print_common_help(stdout);
      }
      std::exit(0);
    } else if (flag == "--quick" || flag == "--tiny") {
      const size_mode mode = flag == "--quick" ? size_mode::quick : size_mode::tiny;
      if (o.size != size_mode::full && o.size != mode)
        usage_error(o, "--quick and --tiny exclude each other");
      o.size = mode;
    } else if (flag == "--repeat") {
      const std::uint64_t r = parse_count(o, flag, take_value());
      if (r < 1 || r > 1000) usage_error(o, "--repeat wants 1..1000");
      o.repeat = static_cast<int>(r);
      o.repeat_given = true;
    } else if (flag == "--threads") {
      o.threads.clear();
      for (const std::string& part : split(take_value())) {
        const std::uint64_t t = parse_count(o, flag, part);
        if (t < 1 || t > 1024) usage_error(o, "--threads wants counts in 1..1024");
        o.threads.push_back(static_cast<unsigned>(t));
      }
    } else if (flag == "--peers") {
      o.peers = split(take_value());
      for (const std::string& p : o.peers)
        if (!is_peer_name(p)) usage_error(o, "unknown peer '" + p + "'; peers: " + peer_list());
    } else if (flag == "--out") {
      o.out_file = take_value();
      const auto ends_with = [&](std::string_view tail) {
        return o.out_file.size() >= tail.size() &&
               o.out_file.compare(o.out_file.size() - tail.size(), tail.size(), tail) == 0;
      };
      if (!ends_with(".csv") && !ends_with(".json"))
        usage_error(o, "--out wants a .csv or .json file");
    } else if (flag == "--same-process") {
      o.same_process = true;
    } else if (flag == "--plot") {
      o.plot_target = take_value();
    } else if (flag == "--spin-rounds") {
      const std::uint64_t r = parse_count(o, flag, take_value());
      if (r > 1'000'000) usage_error(o, "--spin-rounds wants 0..1000000");
      o.spin_rounds = static_cast<unsigned>(r);
    } else if (flag == "--defer-period") {
      const std::uint64_t us = parse_count(o, flag, take_value());
      if (us > 10'000'000) usage_error(o, "--defer-period wants 0..10000000 (microseconds)");
      o.defer_period_us = static_cast<unsigned>(us);
    } else if (flag == "--tls" && exp &&
               std::find(exp->params.begin(), exp->params.end(), flag) != exp->params.end()) {
      o.tls = true;
    } else if (flag == "--find-max" && exp &&
               std::find(exp->params.begin(), exp->params.end(), flag) != exp->params.end()) {
      o.find_max = true;
    } else if (exp &&
               std::find(exp->params.begin(), exp->params.end(), flag) != exp->params.end()) {
      apply_param(o, flag, take_value());
    } else if (!exp && flag.rfind("--", 0) == 0 && flag.size() > 2) {
      usage_error(o, "`all` takes only the common options (" + flag +
                         " belongs to one experiment: run that experiment alone)");
    } else {
      usage_error(o, "unknown option '" + flag + "'");
    }
  }
  return o;
}

std::string count_label(std::uint64_t n) {
  if (n >= 1'000'000 && n % 1'000'000 == 0) return std::to_string(n / 1'000'000) + "M";
  if (n >= 1'000 && n % 1'000 == 0) return std::to_string(n / 1'000) + "k";
  return std::to_string(n);
}

}  // namespace bench
