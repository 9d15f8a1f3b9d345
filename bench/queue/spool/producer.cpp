// spool's producer for the queue benchmark (bench/queue/README.md, the contract):
//
//   producer --redis URL --queue Q --jobs N (--mode single|bulk [--bulk B] | --rate R)
//            [--timeout S]
//   producer --redis URL --queue Q --print-commands
//
// Each job is task `noop` with its submit time (CLOCK_REALTIME, ns) as payload, submitted with
// spool::queue::producer and its defaults (acknowledged once Redis has executed the
// submission, no replicas asked). A result is seen when its future completes: the producer's
// result thread pops the outcome Redis pushed to the producer's list and completes the future,
// whose continuation notes the time.
//   --mode single: N submit() calls from one thread; --mode bulk: submit_bulk() of B jobs (one
//   round trip each). Prints {"jobs", "submit_s", "done_s"}. With --submit-only the producer
//   waits for no result and prints {"jobs", "submit_s"}: with no worker running, the rate at
//   which one thread's submissions are acknowledged, the bound on any single-submit rate.
//   --rate R: open loop, job k sent at start + k/R by one of 16 submitting threads (each waits
//   for its own acknowledgement, which under appendfsync always follows an fsync), so that one
//   slow acknowledgement does not hold back the schedule. Prints {"jobs", "rate", "start_us",
//   "result_us", "send_lag_us"} with p50, p99 and max.
// Exits 1 with a message if a job fails or a result is missing --timeout s (default 120) after
// the last submission.
//
// --print-commands prints the Redis commands of one job as the contract's template: loading the
// functions once, then per job the submission, a claim of one job, its outcome, and the pop of
// the outcome ({job} stands for the job's number). That is the most one job costs: under load
// a worker claims as many jobs as it has room for in one call and records up to 256 outcomes in
// one, and the producer pops up to 1024 outcomes at once. Leases are renewed once per lease / 3
// for all the jobs a worker holds, and an idle worker's BLPOP of a wake-up token is not part of a
// job.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "driver_common.hpp"
#include "functions.hpp"
#include "spool/queue.hpp"

namespace {

using namespace spool_queue_bench;
using namespace std::chrono_literals;
namespace q = spool::queue;

constexpr const char* usage =
    "usage: producer --redis URL --queue Q --jobs N (--mode single|bulk [--bulk B] | --rate R) "
    "[--timeout S] [--submit-only]\n       producer --redis URL --queue Q --print-commands";
constexpr unsigned rate_threads = 16;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_command(const std::vector<std::string>& args) {
  std::string out = "[";
  for (std::size_t i = 0; i < args.size(); ++i) {
    out += (i ? ", " : "") + json_string(args[i]);
  }
  return out + "]";
}

void print_commands(const std::string& queue) {
  const std::string prefix = "spool:{" + queue + "}";
  const std::string reply = "spool:reply:bench";
  const std::vector<std::vector<std::string>> job = {
      {"FCALL", "spool_submit", "1", prefix, queue, reply, "1", "noop", "{job}", "", "1", "0", "1",
       "1000", "3600000", "0", "86400", "5"},
      {"FCALL", "spool_claim", "1", prefix, queue, "bench", "1", "30000", "0", "100"},
      {"FCALL", "spool_finish", "1", prefix, queue, "bench", "1", "{job}", "1", "ok",
       "1700000000000000000", "0.5000"},
      {"BLMPOP", "1", "1", reply, "LEFT", "COUNT", "1"}};
  std::string out =
      "{\"setup\": [" +
      json_command({"FUNCTION", "LOAD", "REPLACE", spool::queue::detail::functions().code}) +
      "], \"job\": [";
  for (std::size_t i = 0; i < job.size(); ++i) out += (i ? ", " : "") + json_command(job[i]);
  std::printf("%s]}\n", out.c_str());
}

std::int64_t parse_number(const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') fail("a result that is not a time in ns: " + text);
  return v;
}

// p50, p99, max of microseconds.
std::string summary(std::vector<double> us) {
  if (us.empty()) return "{}";
  std::sort(us.begin(), us.end());
  const auto at = [&](double p) {
    return us[std::min(us.size() - 1,
                       static_cast<std::size_t>(p * static_cast<double>(us.size())))];
  };
  char text[160];
  std::snprintf(text, sizeof text, "{\"p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}", at(0.50),
                at(0.99), us.back());
  return text;
}

// Each result's future, with the steady time it completed noted by its continuation.
struct results {
  std::vector<spool::future<std::string>> futures;
  std::unique_ptr<std::atomic<std::int64_t>[]> seen_ns;  // CLOCK_REALTIME at completion

  explicit results(std::size_t n) : futures(n), seen_ns(new std::atomic<std::int64_t>[n]) {}

  void watch(std::size_t i, spool::future<std::string> f) {
    futures[i] = std::move(f).then([this, i](std::string r) {
      seen_ns[i].store(now_ns(), std::memory_order_relaxed);
      return r;
    });
  }

  // Waits for every result until `timeout` after now; the results' values. Exits on a failure.
  std::vector<std::string> collect(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<std::string> out;
    out.reserve(futures.size());
    for (std::size_t i = 0; i < futures.size(); ++i) {
      if (!futures[i].wait_until(deadline)) {
        fail("producer: result " + std::to_string(i + 1) + " of " + std::to_string(futures.size()) +
             " missing after the timeout");
      }
      try {
        out.push_back(futures[i].get());
      } catch (const std::exception& e) {
        fail("producer: job " + std::to_string(i + 1) + " failed: " + e.what());
      }
    }
    return out;
  }
};

void run_mode(q::producer& p, const std::string& queue, std::size_t n, bool bulk, std::size_t batch,
              std::chrono::seconds timeout, bool submit_only) {
  results r(n);
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t first_ns = now_ns();
  if (!bulk) {
    for (std::size_t i = 0; i < n; ++i) {
      r.watch(i, std::move(p.submit(queue, "noop", std::to_string(now_ns())).result));
    }
  } else {
    for (std::size_t i = 0; i < n; i += batch) {
      std::vector<q::job_spec> jobs;
      for (std::size_t k = i; k < std::min(n, i + batch); ++k) {
        jobs.push_back({"noop", std::to_string(now_ns()), {}});
      }
      std::vector<q::submitted> acks = p.submit_bulk(queue, jobs);
      for (std::size_t k = 0; k < acks.size(); ++k) r.watch(i + k, std::move(acks[k].result));
    }
  }
  const double submit_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (submit_only) {
    std::printf("{\"jobs\": %zu, \"submit_s\": %.6f}\n", n, submit_s);
    return;
  }
  r.collect(timeout);
  std::int64_t last = first_ns;
  for (std::size_t i = 0; i < n; ++i) last = std::max(last, r.seen_ns[i].load());
  std::printf("{\"jobs\": %zu, \"submit_s\": %.6f, \"done_s\": %.6f}\n", n, submit_s,
              static_cast<double>(last - first_ns) / 1e9);
}

void run_rate(q::producer& p, const std::string& queue, std::size_t n, double rate,
              std::chrono::seconds timeout) {
  results r(n);
  std::vector<std::int64_t> sent(n);
  std::vector<double> lag_us(n);
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::string error;
  const auto start = std::chrono::steady_clock::now() + 100ms;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < rate_threads; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t k = t; k < n && !failed; k += rate_threads) {
        const auto when = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(static_cast<double>(k) / rate));
        std::this_thread::sleep_until(when);
        lag_us[k] =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - when)
                .count();
        sent[k] = now_ns();
        try {
          r.watch(k, std::move(p.submit(queue, "noop", std::to_string(sent[k])).result));
        } catch (const std::exception& e) {
          std::lock_guard lock(error_mu);
          error = e.what();
          failed = true;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (failed) fail("producer: a submission failed: " + error);
  const std::vector<std::string> values = r.collect(timeout);
  std::vector<double> start_us(n), result_us(n);
  for (std::size_t k = 0; k < n; ++k) {
    start_us[k] = static_cast<double>(parse_number(values[k]) - sent[k]) / 1e3;
    result_us[k] = static_cast<double>(r.seen_ns[k].load() - sent[k]) / 1e3;
  }
  std::printf(
      "{\"jobs\": %zu, \"rate\": %g, \"start_us\": %s, \"result_us\": %s, "
      "\"send_lag_us\": %s}\n",
      n, rate, summary(start_us).c_str(), summary(result_us).c_str(), summary(lag_us).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const auto a = parse_args(argc, argv, usage, {"--print-commands", "--submit-only"});
  const std::string queue = required(a, "--queue", usage);
  const std::string url = store_url(required(a, "--redis", usage));
  if (a.count("--print-commands")) {
    print_commands(queue);
    return 0;
  }
  const long jobs = std::atol(required(a, "--jobs", usage).c_str());
  if (jobs < 1) fail("--jobs must be at least 1");
  const auto timeout =
      std::chrono::seconds(a.count("--timeout") ? std::atol(a.at("--timeout").c_str()) : 120);
  try {
    q::producer p(url);
    if (a.count("--rate")) {
      const double rate = std::atof(a.at("--rate").c_str());
      if (!(rate > 0)) fail("--rate must be positive");
      run_rate(p, queue, static_cast<std::size_t>(jobs), rate, timeout);
    } else {
      const std::string mode = required(a, "--mode", usage);
      if (mode != "single" && mode != "bulk")
        fail("--mode must be single or bulk\n" + std::string(usage));
      const long batch = a.count("--bulk") ? std::atol(a.at("--bulk").c_str()) : 100;
      if (batch < 1) fail("--bulk must be at least 1");
      run_mode(p, queue, static_cast<std::size_t>(jobs), mode == "bulk",
               static_cast<std::size_t>(batch), timeout, a.count("--submit-only") > 0);
    }
  } catch (const std::exception& e) {
    fail(std::string("producer: ") + e.what());
  }
  std::fflush(stdout);
  return 0;
}
