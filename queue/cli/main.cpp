// spool-queue: the queue's command line.
//
//   spool-queue --store URL [--replicas N] [--replica-timeout D] [--replace-functions]
//               COMMAND ...
//
// Exit status: 0 done; 1 the job failed or was cancelled (submit --wait); 2 a usage error or
// an argument the queue refuses; 3 Redis unavailable or the outcome unknown; 4 no such job;
// 5 the job's state does not allow it; 6 any other error; 7 the queue is full; 8 Redis holds
// another spool build's queue functions (--replace-functions replaces them).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "arguments.hpp"
#include "builtin_handlers.hpp"
#include "metrics_endpoint.hpp"
#include "spool/queue.hpp"

namespace spool_queue_cli {
namespace {

using namespace std::chrono_literals;
namespace q = spool::queue;

constexpr const char* usage_text =
    "usage: spool-queue --store URL [--replicas N] [--replica-timeout D] [--replace-functions]\n"
    "                   COMMAND ...\n"
    "  URL: redis://HOST[:PORT] or redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER\n"
    "  D: a duration, 250ms, 2s, 1.5 (seconds), 3m, 1h\n"
    "  --replace-functions: load this build's queue functions over another build's (only\n"
    "    once every process of that build has stopped)\n"
    "commands:\n"
    "  submit QUEUE TASK [PAYLOAD|-] [--key K] [--delay D] [--priority low|normal|high]\n"
    "         [--attempts N] [--backoff D] [--time-limit D] [--ttl D] [--takeovers N]\n"
    "         [--wait [--timeout D]]       prints the job id (and, with --wait, the result)\n"
    "  status JOB                           the job as JSON\n"
    "  stats [QUEUE]                        a queue's figures as JSON (every queue's if none)\n"
    "  dead QUEUE [--limit N]               dead jobs as JSON, oldest first (finished_ms: died)\n"
    "  cancel JOB | requeue JOB | delete JOB\n"
    "  pause QUEUE | resume QUEUE | limit QUEUE N   (N = maximum length, 0 = none)\n"
    "  worker --queue Q [--threads N] [--prefetch N] [--lease D] [--check-interval D]\n"
    "         [--drain-timeout D] [--name NAME] [--record-file F] [--no-direct]\n"
    "         [--metrics-port P [--metrics-bind ADDR]]\n"
    "         runs the built-in tasks echo, sleep, fail, sha256, record; SIGTERM drains\n";

struct global_options {
  std::string store;
  unsigned replicas = 0;
  std::chrono::milliseconds replica_timeout{1000};
  q::connection_options connection;
};

void print_line(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

void expect_positional(const arguments& a, std::size_t min, std::size_t max, const char* command) {
  const std::size_t n = a.positional().size();
  if (n < min || n > max) {
    throw usage_error(
        std::string(command) + ": expected " +
        (min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max)) +
        " argument(s), got " + std::to_string(n));
  }
}

int submit(const global_options& g, std::vector<std::string> words) {
  const arguments a(std::move(words),
                    {"--key", "--delay", "--priority", "--attempts", "--backoff", "--time-limit",
                     "--ttl", "--takeovers", "--timeout"},
                    {"--wait"});
  expect_positional(a, 2, 3, "submit");
  const std::string& queue = a.positional()[0];
  const std::string& task = a.positional()[1];
  std::string payload = a.positional().size() > 2 ? a.positional()[2] : "";
  if (payload == "-") payload = read_stdin();
  q::job_options o;
  if (auto v = a.value("--key")) o.key = *v;
  if (auto v = a.value("--delay")) o.delay = parse_duration("--delay", *v);
  if (auto v = a.value("--priority")) o.priority = parse_priority(*v);
  if (auto v = a.value("--attempts")) {
    o.attempts = static_cast<unsigned>(parse_count("--attempts", *v, 1000000));
  }
  if (auto v = a.value("--backoff")) o.backoff = parse_duration("--backoff", *v);
  if (auto v = a.value("--time-limit")) o.time_limit = parse_duration("--time-limit", *v);
  if (auto v = a.value("--ttl")) {
    o.result_ttl = std::chrono::ceil<std::chrono::seconds>(parse_duration("--ttl", *v));
  }
  if (auto v = a.value("--takeovers")) {
    o.takeovers = static_cast<unsigned>(parse_count("--takeovers", *v, 1000000));
  }
  std::optional<std::chrono::milliseconds> timeout;
  if (auto v = a.value("--timeout")) timeout = parse_duration("--timeout", *v);
  if (timeout && !a.flag("--wait")) throw usage_error("submit: --timeout goes with --wait");

  q::producer_options po;
  po.replicas = g.replicas;
  po.replica_timeout = g.replica_timeout;
  po.on_full = spool::full_policy::reject;
  po.connection = g.connection;
  q::producer p(g.store, po);
  q::submitted s = p.submit(queue, task, payload, o);
  print_line(s.id);
  if (!a.flag("--wait")) return 0;
  if (timeout && !s.result.wait_for(*timeout)) {
    std::fprintf(stderr, "spool-queue: %s: no outcome within %lld ms\n", s.id.c_str(),
                 static_cast<long long>(timeout->count()));
    return 1;
  }
  try {
    print_line(s.result.get());
    return 0;
  } catch (const q::job_failed& e) {
    std::fprintf(stderr, "spool-queue: %s failed: %s\n", s.id.c_str(), e.what());
  } catch (const q::job_cancelled&) {
    std::fprintf(stderr, "spool-queue: %s was cancelled\n", s.id.c_str());
  }
  return 1;
}

int stats(const global_options& g, std::vector<std::string> words) {
  const arguments a(std::move(words), {}, {});
  expect_positional(a, 0, 1, "stats");
  q::admin admin(g.store, g.connection);
  if (a.positional().size() == 1) {
    print_line(to_json(admin.stats(a.positional()[0])));
    return 0;
  }
  std::string out = "{\"queues\":[";
  bool first = true;
  for (const std::string& name : admin.queues()) {
    out += (first ? "" : ",") + to_json(admin.stats(name));
    first = false;
  }
  print_line(out + "]}");
  return 0;
}

int dead(const global_options& g, std::vector<std::string> words) {
  const arguments a(std::move(words), {"--limit"}, {});
  expect_positional(a, 1, 1, "dead");
  std::size_t limit = 100;
  if (auto v = a.value("--limit")) limit = parse_count("--limit", *v, 100000);
  q::admin admin(g.store, g.connection);
  std::string out = "[";
  for (const q::job_status& s : admin.dead(a.positional()[0], limit)) {
    if (out.size() > 1) out += ",";
    out += to_json(s);
  }
  print_line(out + "]");
  return 0;
}

// One JOB or QUEUE argument, then an admin call.
int on_one(const global_options& g, std::vector<std::string> words, const char* command) {
  const std::string name = command;
  const arguments a(std::move(words), {}, {});
  expect_positional(a, name == "limit" ? 2 : 1, name == "limit" ? 2 : 1, command);
  const std::string& what = a.positional()[0];
  q::admin admin(g.store, g.connection);
  if (name == "status") {
    print_line(to_json(admin.status(what)));
  } else if (name == "cancel") {
    const q::job_state was = admin.cancel(what);
    print_line(what + " cancelled (it was " + std::string(q::to_string(was)) + ")");
  } else if (name == "requeue") {
    admin.requeue(what);
    print_line(what + " queued again");
  } else if (name == "delete") {
    admin.remove(what);
    print_line(what + " deleted");
  } else if (name == "pause") {
    admin.pause(what);
    print_line(what + " paused");
  } else if (name == "resume") {
    admin.resume(what);
    print_line(what + " resumed");
  } else {
    const std::uint64_t max = parse_count("limit", a.positional()[1], std::uint64_t{1} << 50);
    admin.set_max_length(what, max);
    print_line(what + ": maximum length " + (max == 0 ? "none" : std::to_string(max)));
  }
  return 0;
}

int worker(const global_options& g, std::vector<std::string> words) {
  const arguments a(
      std::move(words),
      {"--queue", "--threads", "--prefetch", "--lease", "--check-interval", "--drain-timeout",
       "--name", "--record-file", "--metrics-port", "--metrics-bind"},
      {"--no-direct"});
  expect_positional(a, 0, 0, "worker");
  q::worker_options o;
  const auto queue = a.value("--queue");
  if (!queue) throw usage_error("worker: --queue is required");
  o.queue = *queue;
  if (auto v = a.value("--threads"))
    o.threads = static_cast<unsigned>(parse_count("--threads", *v, 10000));
  if (auto v = a.value("--prefetch"))
    o.prefetch = static_cast<unsigned>(parse_count("--prefetch", *v, 10000));
  if (auto v = a.value("--lease")) o.lease = parse_duration("--lease", *v);
  if (auto v = a.value("--check-interval")) {
    o.check_interval = parse_duration("--check-interval", *v);
  } else {
    o.check_interval = std::min(o.check_interval, o.lease / 2);
  }
  if (auto v = a.value("--drain-timeout")) o.drain_timeout = parse_duration("--drain-timeout", *v);
  if (auto v = a.value("--name")) o.name = *v;
  o.direct = !a.flag("--no-direct");
  o.connection = g.connection;

  // SIGTERM and SIGINT go to a thread of their own (blocked everywhere else, before any thread
  // starts), which asks the worker to stop.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  q::worker w(g.store, o);
  register_builtin_handlers(w, a.value("--record-file").value_or(""));
  std::optional<metrics_endpoint> metrics;
  if (auto port = a.value("--metrics-port")) {
    metrics.emplace(a.value("--metrics-bind").value_or("127.0.0.1"),
                    static_cast<int>(parse_count("--metrics-port", *port, 65535)),
                    [&w] { return w.prometheus(); });
    std::fprintf(stderr, "spool-queue: worker %s: metrics on http://%s:%d/metrics\n",
                 w.name().c_str(), a.value("--metrics-bind").value_or("127.0.0.1").c_str(),
                 metrics->port());
  }
  w.start();
  std::atomic<bool> stopped{false};
  std::thread signals([&w, &stopped, stop_signals] {
    const timespec tick{0, 100'000'000};
    while (!stopped.load()) {
      if (sigtimedwait(&stop_signals, nullptr, &tick) > 0) w.request_stop();
    }
  });
  print_line("ready " + w.name());
  w.wait();
  const q::worker_counters c = w.counters();
  std::fprintf(stderr,
               "spool-queue: worker %s stopped: %llu started, %llu done, %llu failed, "
               "%llu handed back, %llu leases lost, %llu taken over\n",
               w.name().c_str(), static_cast<unsigned long long>(c.started),
               static_cast<unsigned long long>(c.done), static_cast<unsigned long long>(c.failed),
               static_cast<unsigned long long>(c.handed_back),
               static_cast<unsigned long long>(c.lost),
               static_cast<unsigned long long>(c.takeovers));
  stopped.store(true);
  signals.join();
  return 0;
}

int run(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  global_options g;
  // The global options come before the command.
  std::size_t i = 0;
  for (; i < words.size() && words[i].starts_with("--"); ++i) {
    const std::string& w = words[i];
    const std::size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    if (name == "--help") {
      std::fputs(usage_text, stdout);
      return 0;
    }
    if (w == "--replace-functions") {
      g.connection.replace_functions = true;
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = w.substr(eq + 1);
    } else if (i + 1 < words.size()) {
      value = words[++i];
    } else {
      throw usage_error(name + " needs a value");
    }
    if (name == "--store") {
      g.store = value;
    } else if (name == "--replicas") {
      g.replicas = static_cast<unsigned>(parse_count("--replicas", value, 100));
    } else if (name == "--replica-timeout") {
      g.replica_timeout = parse_duration("--replica-timeout", value);
    } else {
      throw usage_error("unknown option " + name + " (before the command)");
    }
  }
  if (i == words.size()) throw usage_error("no command");
  if (g.store.empty()) throw usage_error("--store URL is required");
  const std::string command = words[i];
  std::vector<std::string> rest(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
  if (command == "submit") return submit(g, std::move(rest));
  if (command == "stats") return stats(g, std::move(rest));
  if (command == "dead") return dead(g, std::move(rest));
  if (command == "worker") return worker(g, std::move(rest));
  for (const char* one : {"status", "cancel", "requeue", "delete", "pause", "resume", "limit"}) {
    if (command == one) return on_one(g, std::move(rest), one);
  }
  throw usage_error("unknown command " + command);
}

int exit_status(q::errc e) {
  switch (e) {
    case q::errc::invalid_argument:
    case q::errc::too_large:
      return 2;
    case q::errc::unavailable:
    case q::errc::outcome_unknown:
      return 3;
    case q::errc::not_found:
      return 4;
    case q::errc::wrong_state:
      return 5;
    case q::errc::full:
    case q::errc::timed_out:
      return 7;
    case q::errc::other_version:
      return 8;
    default:
      return 6;
  }
}

}  // namespace
}  // namespace spool_queue_cli

int main(int argc, char** argv) {
  using namespace spool_queue_cli;
  signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "spool-queue: %s\n%s", e.what(), usage_text);
    return 2;
  } catch (const spool::queue::error& e) {
    std::fprintf(stderr, "spool-queue: %s\n", e.what());
    return exit_status(e.value());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spool-queue: %s\n", e.what());
    return 6;
  }
}
