// siege: the producer-consumer thread-pool paper's experiment. siege simulates N concurrent
// users against an "original server" (spoold --model iterative, or threaded) and against the
// producer-consumer pool (spoold --model queue), with spoold's default model (epoll) and nginx
// beside them; the paper's figures are the average response time, the successful
// transactions and the transactions per second, at N = 100..500 (its Tables 1-2, Figure 4).
// Two forms: a fixed number of requests per user (siege -r, the paper's) and a fixed time
// (siege -t). Each measurement starts its server fresh.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "experiments/load_experiments.hpp"
#include "plot.hpp"
#include "servers/compared_servers.hpp"
#include "servers/nginx.hpp"
#include "servers/run_setup.hpp"
#include "servers/server_measurement.hpp"
#include "servers/siege.hpp"
#include "servers/spoold.hpp"
#include "servers/tables.hpp"
#include "servers/temp_dir.hpp"

namespace bench {

namespace {

// A one-shot run still going after this is killed (siege's own socket timeout is 30 s), and a
// timed run still going this long after its time (a healthy one ends within a second of it:
// siege cancels its users then). The smoke test's limits stay below the watchdog's 30 s per
// measurement.
unsigned reps_limit_seconds(const load_options& o) { return o.by_size(120u, 120u, 20u); }
unsigned time_slack_seconds(const load_options& o) { return o.by_size(15u, 15u, 10u); }
// siege 4.0.7 now and then deadlocks at the end of a timed run (siege_error::hung): the
// measurement is taken again from a fresh server, this many times in all at most (once in the
// smoke test, which must stay within the watchdog's 30 s).
int attempts_when_siege_hangs(const load_options& o) { return o.by_size(3, 3, 1); }

// siege hung and was killed: not the server's doing, so worth another attempt.
class siege_hung : public point_failure {
 public:
  using point_failure::point_failure;
};

struct plan {
  std::vector<std::uint64_t> concurrency;
  std::vector<std::string> forms;  // "reps" (siege -r), "time" (siege -t)
  std::vector<std::string> modes;  // "close" (siege's default, the paper's), "keepalive"
  unsigned reps = 20, seconds = 10;
  unsigned reps_limit_s = 120, time_slack_s = 15;
  int attempts = 3;  // when siege hangs
  served_content served;
  std::string original;  // the spoold model playing the paper's original server
  std::vector<server_kind> servers;
};

std::vector<std::string> server_names(const load_options& o) {
  if (!o.servers.empty()) return o.servers;
  // The smoke test leaves nginx out: spoold's three models are what it checks.
  return o.size == size_mode::tiny ? std::vector<std::string>{"spoold"}
                                   : std::vector<std::string>{"spoold", "nginx"};
}

// What a server stands for in the paper's experiment.
std::string role_of(const plan& p, const std::string& row_name) {
  const std::string name = short_server_name(row_name);
  if (name == p.original) return "the paper's original server";
  if (name == "queue") return "the paper's producer-consumer pool";
  if (name == "epoll") return "spoold's default";
  if (name == "nginx") return "reference";
  return "";
}

plan make_plan(const load_options& o) {
  plan p;
  p.concurrency = !o.concurrency.empty()      ? o.concurrency
                  : o.size == size_mode::tiny ? std::vector<std::uint64_t>{5}
                                              : std::vector<std::uint64_t>{100, 200, 300, 400, 500};
  p.forms = !o.siege_forms.empty()      ? o.siege_forms
            : o.size == size_mode::tiny ? std::vector<std::string>{"reps"}
                                        : std::vector<std::string>{"reps", "time"};
  p.modes = o.connection_modes.empty() ? std::vector<std::string>{"close"} : o.connection_modes;
  p.reps = static_cast<unsigned>(o.reps ? *o.reps : o.by_size<std::uint64_t>(20, 20, 10));
  p.seconds = whole_seconds(o, o.by_size(10.0, 5.0, 2.0), "siege");
  p.reps_limit_s = reps_limit_seconds(o);
  p.time_slack_s = time_slack_seconds(o);
  p.attempts = attempts_when_siege_hangs(o);
  for (std::uint64_t c : p.concurrency)
    if (c > 100'000)
      cannot_run("siege", "--concurrency: siege runs a thread per user; at most 100000");
  p.original = o.original_model.empty() ? "iterative" : o.original_model;
  require_program("siege", "siege");
  p.served = checked_content(o, server_names(o), "siege");

  // The paper's two servers first, in its order, then spoold's default and nginx.
  const std::vector<std::string> models =
      o.spoold_models.empty() ? std::vector<std::string>{p.original, "queue", "epoll"}
                              : expand_spoold_models(o.spoold_models);
  p.servers = server_kinds(o, server_names(o), p.served.root, models, {});
  return p;
}

std::string variant_of(const std::string& form, const std::string& mode, std::uint64_t users) {
  return form + " " + mode + " c=" + std::to_string(users);
}

std::string form_command(const plan& p, const std::string& form) {
  return form == "reps" ? "siege -c N -r " + std::to_string(p.reps)
                        : "siege -c N -t " + std::to_string(p.seconds) + "S";
}

std::string form_title(const plan& p, const std::string& form) {
  return form == "reps" ? "one-shot form (the paper's): siege -c N -r " + std::to_string(p.reps) +
                              ", N x " + std::to_string(p.reps) + " transactions"
                        : "timed form: siege -c N -t " + std::to_string(p.seconds) + "S";
}

struct point {
  std::string variant;
  const server_kind& kind;
  std::string form, mode;
  std::uint64_t users;
};

[[noreturn]] void give_up(const point& at, const std::string& stage, const std::exception& e) {
  const auto* siege = dynamic_cast<const siege_error*>(&e);
  const point_failure failure =
      stage_failure("siege", at.variant, at.kind.name, stage, e, siege ? siege->reason() : "");
  if (siege && siege->hung()) throw siege_hung(failure.what());
  throw failure;
}

// One attempt at a measurement: a fresh server, a probe GET (status 200 and the file's bytes),
// one run of siege, a graceful stop. The sample's value is the mean response time in seconds,
// unrounded.
sample measure_once(const point& at, const plan& p, failure_log& log) {
  // Killed (its whole group) if we leave early.
  const std::unique_ptr<running_server> server =
      start_probed("siege", at.variant, at.kind, p.served.url_path, p.served.expected);
  siege_result r;
  const double cpu_before = server->cpu_seconds();
  try {
    const temp_dir scratch("spool-load-bench-siege");
    siege_settings s;
    s.url = "http://127.0.0.1:" + std::to_string(server->port()) + p.served.url_path;
    s.users = static_cast<unsigned>(at.users);
    s.reps = at.form == "reps" ? p.reps : 0;
    s.seconds = p.seconds;
    s.keep_alive = at.mode == "keepalive";
    s.limit_seconds = at.form == "reps" ? p.reps_limit_s : p.seconds + p.time_slack_s;
    s.dir = scratch.path();
    r = run_siege(s);
  } catch (const std::exception& e) {
    give_up(at, "siege", e);
  }
  const double cpu_after = server->cpu_seconds();
  if (r.successful == 0)
    throw point_failure("no successful transaction (" + std::to_string(r.failed) + " failed" +
                        (r.first_error.empty() ? "" : "; siege: " + r.first_error) + ")");
  if (r.failed > 0 && !r.first_error.empty())
    log.remark(at.variant, at.kind.name, 0, "siege: " + r.first_error);
  stop_with_remark(*server, "siege", at.variant, at.kind.name, 0, log);
  const double wall = r.elapsed_s > 0 ? r.elapsed_s : r.wall_s;
  return {r.response_time_fine_s(),
          {{"response_time_s", r.response_time_s},
           {"successful", static_cast<double>(r.successful)},
           {"failed", static_cast<double>(r.failed)},
           {"transactions", static_cast<double>(r.transactions)},
           {"availability_pct", r.availability_pct},
           {"transaction_rate", r.transaction_rate},
           {"elapsed_s", r.elapsed_s},
           {"longest_s", r.longest_s},
           {"concurrency", r.concurrency},
           {"throughput_mb_s", r.throughput_mb_s},
           {"server_cores", (cpu_after - cpu_before) / wall},
           {"client_cores", r.client_cpu_s / r.wall_s}}};
}

// A measurement, taken again when siege hangs (up to p.attempts in all).
sample measure(const point& at, const plan& p, failure_log& log) {
  for (int attempt = 1;; ++attempt) {
    try {
      return measure_once(at, p, log);
    } catch (const siege_hung& e) {
      if (attempt >= p.attempts) throw;
      log.remark(at.variant, at.kind.name, 0,
                 "siege hung at the end of its run and was killed (a siege 4.0.7 deadlock, see "
                 "bench/README.md); measured again");
    }
  }
}

// The paper's Tables 1 and 2 side by side: per server (in the paper's order) and concurrency,
// its three columns (average response time, successful transactions, transactions/s), then
// failed transactions, availability and the server's CPU.
void print_form_table(const results& res, const plan& p, const std::string& form,
                      const std::string& mode, int repeats, const failure_log& log) {
  std::vector<std::vector<std::string>> cells{
      {"server", "role", "concurrency", "response s", "(unrounded)", "successful", "trans/s",
       "failed", "availability", "longest s", "server cores", "notes"}};
  footnotes notes;
  for (const server_kind& k : p.servers) {
    for (std::uint64_t c : p.concurrency) {
      const row* r = find_row(res, "siege", variant_of(form, mode, c), k.name, 0);
      if (r == nullptr) continue;
      const std::string note = notes.mark(log.notes(r->variant, r->peer, 0));
      if (!r->ran()) {
        cells.push_back(
            {k.name, role_of(p, k.name), std::to_string(c), "-", "", "", "", "", "", "", "", note});
        continue;
      }
      const auto med = [r](const char* name) { return r->extra(name)->median; };
      std::string successful = fixed(med("successful"), 0);
      if (form == "reps") successful += "/" + std::to_string(c * p.reps);
      cells.push_back({k.name, role_of(p, k.name), std::to_string(c),
                       fixed(med("response_time_s"), 2), fixed(r->value().median, 4), successful,
                       fixed(med("transaction_rate"), 1), fixed(med("failed"), 0),
                       fixed(med("availability_pct"), 2) + "%", fixed(med("longest_s"), 2),
                       fixed(med("server_cores"), 2), note});
    }
  }
  if (cells.size() == 1) return;
  std::printf("\n== siege, %s, Connection: %s; median over %d repeat(s) ==\n",
              form_title(p, form).c_str(), mode == "close" ? "close" : "keep-alive", repeats);
  std::printf(
      "   response s: siege's average response time (as it prints it, to 0.01 s); unrounded:\n"
      "   siege's concurrency x elapsed / transactions, the same mean before rounding\n");
  print_cells(cells, {0, 1, 11});
  notes.print(stdout);
  std::fflush(stdout);
}

// The paper's Figure 4: average response time against concurrency, one line per server.
void plot_response(const load_options& o, const results& res, const plan& p,
                   const std::string& form, const std::string& mode) {
  line_chart chart;
  chart.title = "siege: average response time against users, " + form_command(p, form) +
                ", Connection: " + (mode == "close" ? "close" : "keep-alive") + ", median of " +
                std::to_string(repeat_count(o));
  chart.x_label = "concurrent users (siege -c)";
  chart.y_label = "average response time (s)";
  chart.points = true;
  for (const server_kind& k : p.servers) {
    const std::string role = role_of(p, k.name);
    chart.series.push_back({role.empty() ? k.name : k.name + ": " + role, false, false});
    chart.colours.push_back(server_colour(k.name));
  }
  for (std::uint64_t c : p.concurrency) {
    std::vector<double> values{static_cast<double>(c)};
    for (const server_kind& k : p.servers) {
      const row* r = find_row(res, "siege", variant_of(form, mode, c), k.name, 0);
      values.push_back(r != nullptr && r->ran() ? r->value().median : NAN);
    }
    chart.rows.push_back(std::move(values));
  }
  const std::string suffix =
      "-response-" + form + (p.modes.size() > 1 || mode != "close" ? "-" + mode : "");
  plot_lines(chart, companion_path(plot_path(o.plot_target, "siege", false), suffix, ".png"));
}

void print_versions(const load_options& o, const plan& p) {
  print_run_head("# siege:    " + std::to_string(p.concurrency.size()) +
                     " concurrency value(s) x " + std::to_string(p.forms.size()) + " form(s) x " +
                     std::to_string(p.modes.size()) + " mode(s)",
                 p.servers, p.served);
  std::string version;
  try {
    const temp_dir scratch("spool-load-bench-siege");
    version = siege_version("siege", scratch.path());
  } catch (const std::exception&) {  // only the version line goes without
  }
  std::printf(
      "# load:     %s; rc: parser off, benchmark (no delay), timeout 30 s, limit >= users; a "
      "one-shot run is killed after %u s, a timed one %u s after its time\n",
      version.empty() ? "siege (version unknown)" : version.c_str(), p.reps_limit_s,
      p.time_slack_s);
  const auto names = server_names(o);
  if (std::find(names.begin(), names.end(), "spoold") != names.end())
    std::printf("# spoold:   %s (its defaults; the original server is --model %s)\n",
                spoold_binary(o).c_str(), p.original.c_str());
  if (std::find(names.begin(), names.end(), "nginx") != names.end())
    std::printf("# nginx:    %s\n", version_line(nginx_binary, "-v").c_str());
  std::fflush(stdout);
}

void run(const load_options& o, results& out) {
  const plan p = make_plan(o);
  print_versions(o, p);
  raise_open_file_limit(*std::max_element(p.concurrency.begin(), p.concurrency.end()), "siege");
  const metric m{"response time", "s", false};
  const int repeats = repeat_count(o);
  failure_log log;
  try {
    for (const std::string& form : p.forms) {
      for (const std::string& mode : p.modes) {
        for (std::uint64_t c : p.concurrency) {
          const std::string variant = variant_of(form, mode, c);
          // Threads: siege's users are the load; the row's thread count is not used (0).
          out.add(measure_servers("siege", variant, 0, m, p.servers, repeats, log,
                                  [&p, &log, form, mode, c, variant](const server_kind& k) {
                                    return measure({variant, k, form, mode, c}, p, log);
                                  }));
        }
        print_form_table(out, p, form, mode, repeats, log);
      }
    }
  } catch (const std::exception& e) {
    cannot_run("siege", e.what());
  }
  report_failures("siege", log);
  if (o.plot_target.empty()) return;
  for (const std::string& form : p.forms)
    for (const std::string& mode : p.modes) plot_response(o, out, p, form, mode);
}

}  // namespace

const experiment& siege_experiment() {
  static const experiment e{
      "siege",
      "the thread-pool paper's siege runs: spoold iterative, queue, epoll; nginx.",
      "The producer-consumer thread-pool paper's experiment (its Tables 1-2, Figure 4): siege\n"
      "simulates N concurrent users (a thread each) against the paper's \"original server\"\n"
      "(spoold --model iterative; --original threaded for the other reading), its thread-pool\n"
      "server (spoold --model queue: an acceptor producing connections into libspool's queue,\n"
      "pool workers consuming them), spoold's default model (epoll) and nginx. Each\n"
      "measurement starts the server fresh, checks one GET (status 200, the file's bytes),\n"
      "runs siege once and stops the server. Two forms, each its own table:\n"
      "  reps  siege -c N -r R: every user makes R requests, N x R transactions in all. The\n"
      "        paper's successful-transaction counts never exceed N, so it ran one request per\n"
      "        user (-r 1); that ends in milliseconds here and would time siege's thread\n"
      "        start-up, hence R = 20 by default (--reps 1 is the paper's literal form).\n"
      "  time  siege -c N -t Ss: as many requests as the users make in S seconds.\n"
      "siege runs from an rc file written for the run (HOME is a temporary directory, so\n"
      "~/.siege is never touched): Connection: close (siege's default, so the paper's),\n"
      "HTTP/1.1, benchmark mode (no delay between a user's requests), no HTML parser (one\n"
      "request per transaction), no log, JSON summary, timeout 30 s (siege's default), limit\n"
      "of users raised to max(1000, N), failures unlimited (a refusing server is measured to\n"
      "the end). Figures, medians over the repeats: the paper's three columns (siege's average\n"
      "response time, successful transactions, transactions/s), failed transactions,\n"
      "availability, the longest transaction and the server's process-tree CPU. The row's\n"
      "value is the mean response time in seconds, unrounded (siege prints it to 0.01 s).\n"
      "A measurement that fails is recorded with its reason and the run goes on. Needs siege\n"
      "and nginx (scripts/install-deps.sh); not part of `all`.\n"
      "\n"
      "options:\n"
      "  --concurrency LIST  siege users (default 100,200,300,400,500; --tiny 5)\n"
      "  --forms LIST        reps and/or time (default both; --tiny reps)\n"
      "  --reps R            requests per user in the reps form (default 20; --tiny 10)\n"
      "  --duration S        seconds of the time form, whole (default 10; --quick 5)\n"
      "  --original MODEL    the paper's original server: iterative (default) or threaded\n"
      "  --connection LIST   close (default) and/or keepalive\n"
      "  --servers LIST      spoold and/or nginx (default both; --tiny spoold)\n"
      "  --models LIST       spoold models instead of ORIGINAL,queue,epoll (`all`: every one)\n"
      "  --spoold PATH       the spoold binary (default: the one built beside spool-load-bench)\n"
      "  --root DIR          the files served (default: the repository's server/site)\n"
      "  --file /PATH        the URL path requested (default /index.html); /guestbook:\n"
      "                      spoold's guestbook page, a SQLite store visit per request\n"
      "                      (spoold only: --servers spoold)\n"
      "  --plot TARGET       also DIR/siege-response-FORM.png: response time against users\n"
      "                      (the paper's Figure 4)\n"
      "  --tiny              5 users, -r 10, iterative, queue and epoll, one repeat (the smoke\n"
      "                      test)",
      {"--concurrency", "--forms", "--reps", "--duration", "--original", "--connection",
       "--servers", "--models", "--spoold", "--root", "--file"},
      run};
  return e;
}

}  // namespace bench
