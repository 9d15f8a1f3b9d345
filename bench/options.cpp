#include "options.hpp"

#include <algorithm>
#include <cstdio>

#include "peers/peer_names.hpp"

namespace bench {

namespace {

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
  }
}

// spool-bench's own options; false for a flag that is not one.
bool apply_own(options& o, const std::string& flag, const std::function<std::string()>& value) {
  if (flag == "--peers") {
    o.peers = split(value());
    for (const std::string& p : o.peers)
      if (!is_peer_name(p)) usage_error(o, "unknown peer '" + p + "'; peers: " + peer_list());
  } else if (flag == "--same-process") {
    o.same_process = true;
  } else if (flag == "--spin-rounds") {
    const std::uint64_t r = parse_count(o, flag, value());
    if (r > 1'000'000) usage_error(o, "--spin-rounds wants 0..1000000");
    o.spin_rounds = static_cast<unsigned>(r);
  } else if (flag == "--defer-period") {
    const std::uint64_t us = parse_count(o, flag, value());
    if (us > 10'000'000) usage_error(o, "--defer-period wants 0..10000000 (microseconds)");
    o.defer_period_us = static_cast<unsigned>(us);
  } else {
    return false;
  }
  return true;
}

}  // namespace

bool options::wants_peer(std::string_view name) const {
  return peers.empty() || std::find(peers.begin(), peers.end(), name) != peers.end();
}

void print_options_help(std::FILE* out) {
  print_run_options_help(out, "pool sizes to measure, e.g. 2,4,8,16 (default 2)",
                         "smaller sizes: `spool-bench all --quick` takes under 5 minutes on 2 "
                         "cores\n"
                         "                   (pc and idle then run 3 times unless --repeat is "
                         "given)",
                         true);
  std::fprintf(
      out,
      "\nspool-bench's options:\n"
      "  --peers LIST     subset of %s (default all)\n"
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
      "                   them\n",
      peer_list().c_str());
}

options parse_options(int argc, char** argv, const experiment* exp) {
  options o;
  parse_run_options(
      argc, argv, o, exp != nullptr,
      [&](const std::string& flag, const std::function<std::string()>& value) {
        if (apply_own(o, flag, value)) return true;
        if (exp == nullptr || !exp->takes(flag)) return false;
        if (flag == "--find-max") {
          o.find_max = true;
        } else {
          apply_param(o, flag, value());
        }
        return true;
      },
      [&] {
        if (exp) {
          print_experiment_help(*exp);
        } else {
          std::printf("usage: spool-bench all [options]: every experiment in turn\n");
        }
        print_options_help(stdout);
      });
  return o;
}

}  // namespace bench
