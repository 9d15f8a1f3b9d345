// http: spoold beside nginx, both serving the same static file to wrk over loopback. For each
// connection mode (keep-alive, or one request per connection) and each concurrency, every
// server is started fresh, warmed up for 1 s, measured for --duration seconds and stopped;
// repeats are interleaved across the servers. Figures: requests/s, latency p50 and p99, errors,
// and the CPU the server's whole process tree used (cores), from /proc. With --models, every
// spoold architecture is a server of its own, and a table in the shape of the ZeroHTTPd
// article's (concurrency x architecture, req/s) follows. A measurement that fails (a server
// that does not start or answers nothing, wrk that cannot open its connections) is recorded
// with its reason and the run goes on.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "experiments/http_tls.hpp"
#include "experiments/load_experiments.hpp"
#include "plot.hpp"
#include "process_stats.hpp"
#include "servers/compared_servers.hpp"
#include "servers/nginx.hpp"
#include "servers/redis.hpp"
#include "servers/run_setup.hpp"
#include "servers/server_measurement.hpp"
#include "servers/spoold.hpp"
#include "servers/tables.hpp"
#include "servers/wrk.hpp"

namespace bench {

namespace {

constexpr unsigned warm_up_seconds = 1;
// wrk still running this long after its -d is killed: the server under it is wedged. The
// smoke test's stays below the watchdog's 30 s per measurement.
unsigned wrk_slack_seconds(const load_options& o) { return o.by_size(30u, 30u, 10u); }
// As many connections as nginx's worker_connections: spoold's default (10000) would answer
// the connections past it with 503, which wrk counts as requests.
constexpr const char* spoold_max_connections = "20000";
// A cell of the architecture table is starred when errors exceed this share of the requests.
constexpr double error_share_flagged = 0.01;

// What every measurement of a run shares.
struct plan {
  std::vector<std::uint64_t> concurrency;
  std::vector<std::string> modes;  // "keepalive", "close"
  unsigned seconds = 10;
  unsigned wrk_slack_s = 30;
  served_content served;
  std::vector<server_kind> servers;  // in the order each repeat runs them
  // --store: spoold's --store for the guestbook ("" for its default, SQLite in its directory),
  // and the redis-server spool-load-bench started for `--store redis` (stopped after the run).
  std::string store;
  std::shared_ptr<running_server> redis;
};

std::vector<std::string> server_names(const load_options& o) {
  return o.servers.empty() ? std::vector<std::string>{"spoold", "nginx"} : o.servers;
}

// The spoold rows: "spoold" for its default model, or one per --models value ("all": every
// model spoold has, servers/spoold.hpp).
std::vector<std::string> spoold_variants(const load_options& o) {
  return o.spoold_models.empty() ? std::vector<std::string>{""}
                                 : expand_spoold_models(o.spoold_models);
}

// A model (or option) this spoold's --help does not mention is most likely not built in: its
// points will fail and say why, but say so before the run too.
void warn_about_unknown_models(const load_options& o) {
  if (o.spoold_models.empty()) return;
  std::string help;
  try {
    help = spoold_help(spoold_binary(o));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spool-load-bench http: warning: %s\n", e.what());
    return;
  }
  for (const std::string& name : spoold_variants(o)) {
    const spoold_variant v = spoold_variant_of(name);
    if (help.find(v.model) == std::string::npos)
      std::fprintf(stderr,
                   "spool-load-bench http: warning: `spoold --help` does not list model '%s'; its "
                   "points will likely fail\n",
                   v.model.c_str());
    if (!v.needs_option.empty() && help.find(v.needs_option) == std::string::npos)
      std::fprintf(stderr,
                   "spool-load-bench http: warning: `spoold --help` has no %s (for %s); its points "
                   "will likely fail\n",
                   v.needs_option.c_str(), name.c_str());
  }
}

// --store is for the guestbook on spoold alone; `redis` needs the redis-server package.
void check_store_option(const load_options& o, const plan& p) {
  if (o.store_spec.empty()) return;
  if (!is_guestbook(p.served.url_path) || server_names(o) != std::vector<std::string>{"spoold"})
    cannot_run("http", "--store is for the guestbook: --file /guestbook --servers spoold");
  if (o.store_spec == "redis" && !is_executable(redis_binary))
    cannot_run("http", std::string(redis_binary) +
                           " is not installed; scripts/install-deps.sh installs it");
}

plan make_plan(const load_options& o) {
  plan p;
  p.concurrency = !o.concurrency.empty()      ? o.concurrency
                  : o.size == size_mode::tiny ? std::vector<std::uint64_t>{10}
                  : o.size == size_mode::quick
                      ? std::vector<std::uint64_t>{20, 100, 1000}
                      : std::vector<std::uint64_t>{20, 100, 500, 1000, 5000};
  p.modes = o.connection_modes.empty() ? std::vector<std::string>{"keepalive", "close"}
                                       : o.connection_modes;
  p.seconds = whole_seconds(o, o.by_size(10.0, 3.0, 1.0), "http", " (wrk's -d)");
  p.wrk_slack_s = wrk_slack_seconds(o);
  // Everything that would make a run fail half-way is checked before the first server starts.
  require_program("http", "wrk");
  p.served = checked_content(o, server_names(o), "http");
  warn_about_unknown_models(o);
  check_store_option(o, p);
  std::vector<std::string> spoold_args{"--max-connections", spoold_max_connections};
  if (o.store_spec == "redis") {
    try {
      p.redis = start_redis();
    } catch (const std::exception& e) {
      cannot_run("http", e.what());
    }
    p.store = redis_store_spec(*p.redis);
  } else {
    p.store = o.store_spec;
  }
  if (!p.store.empty()) spoold_args.insert(spoold_args.end(), {"--store", p.store});
  p.servers = server_kinds(o, server_names(o), p.served.root, spoold_variants(o), spoold_args);
  return p;
}

wrk_settings load(const std::string& url, unsigned threads, std::uint64_t connections,
                  unsigned seconds, bool close, unsigned slack) {
  wrk_settings w;
  w.url = url;
  w.threads = threads;
  w.connections = static_cast<unsigned>(connections);
  w.seconds = seconds;
  w.close_connections = close;
  w.slack_seconds = slack;
  return w;
}

// Where a measurement is, for failure reasons and remarks.
struct point {
  std::string variant;
  const server_kind& kind;
  unsigned threads;
  std::uint64_t connections;
  bool close;
};

// Ends a measurement: the details on stderr, one line as the point's failure.
[[noreturn]] void give_up(const point& at, const std::string& stage, const std::exception& e) {
  const auto* w = dynamic_cast<const wrk_error*>(&e);
  throw stage_failure("http", at.variant, at.kind.name, stage, e, w ? w->reason() : "");
}

// Why a run of wrk with no answer at all got none, from wrk's error counts.
std::string no_answer(const wrk_result& r, unsigned seconds, std::uint64_t connections) {
  const std::string in = " in " + std::to_string(seconds) + " s";
  if (r.errors() == 0)
    return "no request answered" + in + ", and no error either (wrk still opening its " +
           std::to_string(connections) + " connections?)";
  const std::string counts =
      "connect " + std::to_string(r.connect_errors) + ", read " + std::to_string(r.read_errors) +
      ", write " + std::to_string(r.write_errors) + ", timeout " + std::to_string(r.timeouts);
  if (r.timeouts > 0 && r.connect_errors == 0 && r.read_errors == 0 && r.write_errors == 0)
    return "all requests timed out" + in + " (wrk: " + counts + ")";
  return "no request answered" + in + " (wrk errors: " + counts + ")";
}

// One measurement: a fresh server, a probe GET (status 200 and the file's bytes), 1 s of
// warm-up at the same load, the measured run, and a graceful stop. Throws point_failure when
// no figure can be had; an empty warm-up, or a server that stops badly after a good run, keeps
// the figures, with a remark.
sample measure(const point& at, const plan& p, failure_log& log) {
  // Killed (its whole group) if we leave early.
  const std::unique_ptr<running_server> server =
      start_probed("http", at.variant, at.kind, p.served.url_path, p.served.expected);
  const std::string url = "http://127.0.0.1:" + std::to_string(server->port()) + p.served.url_path;

  // Errors under load are the measured run's to report; a server that answers nothing at all
  // is broken (or drowned), and its figures would mean nothing.
  wrk_result r;
  try {
    r = run_wrk(load(url, at.threads, at.connections, warm_up_seconds, at.close, p.wrk_slack_s));
  } catch (const std::exception& e) {
    give_up(at, "warm-up", e);
  }
  // The probe has shown the server answers; at thousands of connections wrk may still be
  // opening them when a 1 s warm-up ends, so an empty warm-up is only worth a note.
  if (r.requests == 0)
    log.remark(at.variant, at.kind.name, at.threads,
               "warm-up: " + no_answer(r, warm_up_seconds, at.connections));

  const double cpu_before = server->cpu_seconds();
  try {
    r = run_wrk(load(url, at.threads, at.connections, p.seconds, at.close, p.wrk_slack_s));
  } catch (const std::exception& e) {
    give_up(at, "wrk", e);
  }
  const double cpu_after = server->cpu_seconds();
  if (r.requests == 0) throw point_failure(no_answer(r, p.seconds, at.connections));
  stop_with_remark(*server, "http", at.variant, at.kind.name, at.threads, log);
  return {r.requests_per_s,
          {{"p50_ms", r.p50_ms},
           {"p99_ms", r.p99_ms},
           {"errors", static_cast<double>(r.errors())},
           {"connect_errors", static_cast<double>(r.connect_errors)},
           {"timeouts", static_cast<double>(r.timeouts)},
           {"requests", static_cast<double>(r.requests)},
           {"server_cores", (cpu_after - cpu_before) / r.wall_s},
           {"client_cores", r.client_cpu_s / r.wall_s}}};
}

std::string variant_of(const std::string& mode, std::uint64_t connections) {
  return mode + " c=" + std::to_string(connections);
}

// spoold's rows get "vs_nginx": the median over the repeats of spoold/nginx requests/s, each
// ratio taken within one repeat (the two ran back to back), > 1 when spoold is ahead.
void add_ratios(std::vector<row>& rows) {
  const auto nginx = std::find_if(rows.begin(), rows.end(),
                                  [](const row& r) { return r.peer == "nginx" && r.ran(); });
  // Called before failed samples are taken out, so that repeats still line up.
  if (nginx == rows.end()) return;
  for (row& r : rows) {
    if (&r == &*nginx || !r.ran()) continue;
    // Failed measurements are NaN samples still: a ratio needs both of its repeat.
    std::vector<double> ratios;
    for (std::size_t i = 0; i < r.samples.size() && i < nginx->samples.size(); ++i)
      if (nginx->samples[i].value > 0 && std::isfinite(r.samples[i].value))
        ratios.push_back(r.samples[i].value / nginx->samples[i].value);
    if (!ratios.empty()) r.derived.emplace_back("vs_nginx", summarize(ratios).median);
  }
}

// The table the experiment is read from: per connection mode and wrk thread count, one line
// per concurrency and server; failed points as "-" with their reason below.
void print_mode_table(const results& res, const plan& p, const std::string& mode, unsigned threads,
                      int repeats, const failure_log& log) {
  std::vector<std::vector<std::string>> cells{{"concurrency", "server", "req/s", "min-max",
                                               "p50 ms", "p99 ms", "errors", "server cores",
                                               "wrk cores", "vs nginx", "notes"}};
  footnotes notes;
  for (std::uint64_t c : p.concurrency) {
    for (const server_kind& k : p.servers) {
      const row* r = find_row(res, "http", variant_of(mode, c), k.name, threads);
      if (r == nullptr) continue;
      const std::string note = notes.mark(log.notes(r->variant, r->peer, threads));
      if (!r->ran()) {
        cells.push_back({std::to_string(c), r->peer, "-", "", "", "", "", "", "", "", note});
        continue;
      }
      const summary v = r->value();
      std::string ratio;
      for (const auto& [name, value] : r->derived)
        if (name == "vs_nginx") ratio = fixed(value, 2) + "x";
      const summary errors = *r->extra("errors");
      cells.push_back({std::to_string(c), r->peer, human(v.median),
                       human(v.min) + "-" + human(v.max), fixed(r->extra("p50_ms")->median, 3),
                       fixed(r->extra("p99_ms")->median, 3),
                       human(errors.median) +
                           (errors.max > errors.median ? " (max " + human(errors.max) + ")" : ""),
                       fixed(r->extra("server_cores")->median, 2),
                       fixed(r->extra("client_cores")->median, 2), ratio, note});
    }
  }
  if (cells.size() == 1) return;
  std::printf(
      "\n== http, %s: wrk -t %u, %u s per run after %u s of warm-up; median (and "
      "min-max of req/s) over %d repeat(s) ==\n",
      mode == "close" ? "Connection: close (a new connection per request)"
                      : "keep-alive (nginx keepalive_requests 100000, not 1000)",
      threads, p.seconds, warm_up_seconds, repeats);
  std::printf(
      "   vs nginx: median of per-repeat ratios of req/s, > 1 means spoold is ahead; "
      "cores: CPU seconds per wall second\n");
  print_cells(cells, {1, 3, 10});
  notes.print(stdout);
  std::fflush(stdout);
}

// The ZeroHTTPd article's table: one line per concurrency, one column per server (each spoold
// model, nginx), cells the median req/s. "-" is a point with no figure, "*" one whose errors
// exceed 1% of its requests, "[n]" a footnote.
void print_architecture_table(const results& res, const plan& p, const std::string& mode,
                              unsigned threads, int repeats, const failure_log& log) {
  std::vector<std::string> head{"concurrency"};
  for (const server_kind& k : p.servers) head.push_back(short_server_name(k.name));
  std::vector<std::vector<std::string>> cells{head};
  footnotes notes;
  bool starred = false;
  for (std::uint64_t c : p.concurrency) {
    std::vector<std::string> line{std::to_string(c)};
    for (const server_kind& k : p.servers) {
      const row* r = find_row(res, "http", variant_of(mode, c), k.name, threads);
      if (r == nullptr) {
        line.push_back("");
        continue;
      }
      const std::string note = notes.mark(log.notes(r->variant, r->peer, threads));
      if (!r->ran()) {
        line.push_back("-" + note);
        continue;
      }
      const double requests = r->extra("requests")->median;
      const bool many_errors = r->extra("errors")->median > error_share_flagged * requests ||
                               r->extra("connect_errors")->max > 0;
      starred = starred || many_errors;
      line.push_back(fixed(r->value().median, 0) + (many_errors ? "*" : "") + note);
    }
    cells.push_back(std::move(line));
  }
  std::printf(
      "\n== http, requests/s by server architecture, %s: wrk -t %u, %u s per run, "
      "median of %d (the shape of the ZeroHTTPd article's table) ==\n",
      mode == "close" ? "Connection: close" : "keep-alive", threads, p.seconds, repeats);
  print_cells(cells, {});
  if (starred)
    std::printf(
        "   * errors (socket errors, timeouts, non-2xx/3xx) above %.0f%% of the requests "
        "answered, or connections wrk could not open: see the table above\n",
        error_share_flagged * 100);
  notes.print(stdout);
  std::fflush(stdout);
}

std::string chart_path(const load_options& o, const std::string& suffix, unsigned threads) {
  const std::string path = companion_path(plot_path(o.plot_target, "http", false), suffix, ".png");
  return threads == o.threads.front()
             ? path
             : companion_path(path, "-t" + std::to_string(threads), ".png");
}

// req/s against concurrency (log scale), one line per server and connection mode; NaN (a gap)
// where a point failed.
void plot_concurrency(const load_options& o, const results& res, const plan& p, unsigned threads,
                      const std::vector<std::string>& modes, const std::string& path) {
  line_chart chart;
  chart.title = "http: requests/s against concurrency, wrk -t " + std::to_string(threads) + ", " +
                std::to_string(p.seconds) + " s per run, median of " +
                std::to_string(repeat_count(o));
  if (modes.size() > 1)
    chart.title += " (keep-alive solid, close dashed)";
  else
    chart.title += modes.front() == "close" ? ", Connection: close" : ", keep-alive";
  chart.x_label = "concurrent connections (log scale)";
  chart.y_label = "requests/s";
  chart.log_x = true;
  chart.points = true;
  for (const std::string& mode : modes)
    for (const server_kind& k : p.servers) {
      chart.series.push_back({modes.size() > 1 ? k.name + " " + mode : k.name, false,
                              modes.size() > 1 && mode == "close"});
      chart.colours.push_back(server_colour(k.name));
    }
  for (std::uint64_t c : p.concurrency) {
    std::vector<double> values{static_cast<double>(c)};
    for (const std::string& mode : modes) {
      for (const server_kind& k : p.servers) {
        const row* r = find_row(res, "http", variant_of(mode, c), k.name, threads);
        values.push_back(r != nullptr && r->ran() ? r->value().median : NAN);
      }
    }
    chart.rows.push_back(std::move(values));
  }
  plot_lines(chart, path);
}

void print_versions(const load_options& o, const plan& p) {
  print_run_head("# http:     " + std::to_string(p.concurrency.size()) +
                     " concurrency value(s) x " + std::to_string(p.modes.size()) + " mode(s)",
                 p.servers, p.served);
  const std::string wrk = version_line("wrk", "-v");
  std::printf("# load:     %s; a run still going %u s after its duration is killed\n",
              wrk.empty() ? "wrk (version unknown)" : wrk.c_str(), p.wrk_slack_s);
  const auto names = server_names(o);
  if (std::find(names.begin(), names.end(), "spoold") != names.end())
    std::printf("# spoold:   %s, --max-connections %s%s%s\n", spoold_binary(o).c_str(),
                spoold_max_connections, p.store.empty() ? "" : ", --store ", p.store.c_str());
  if (std::find(names.begin(), names.end(), "nginx") != names.end())
    std::printf("# nginx:    %s, %u worker processes\n", version_line(nginx_binary, "-v").c_str(),
                online_cpus());
  std::fflush(stdout);
}

// The redis-server of `--store redis`, stopped before the run ends (std::exit in cannot_run
// would leave it running).
void stop_store(const plan& p) {
  if (!p.redis) return;
  try {
    p.redis->stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spool-load-bench http: stopping redis-server: %s\n", e.what());
  }
}

void run(const load_options& o, results& out) {
  if (!o.tls && !o.spoold_b_path.empty()) cannot_run("http", "--spoold-b goes with --tls");
  if (o.tls) {
    try {
      run_http_tls(o);
    } catch (const std::exception& e) {
      cannot_run("http", e.what());  // a server that cannot start, OpenSSL not set up
    }
    return;
  }
  const plan p = make_plan(o);
  print_versions(o, p);
  raise_open_file_limit(*std::max_element(p.concurrency.begin(), p.concurrency.end()), "http");
  const metric m{"throughput", "req/s", true};
  const int repeats = repeat_count(o);
  failure_log log;
  try {
    for (unsigned threads : o.threads) {
      for (const std::string& mode : p.modes) {
        for (std::uint64_t c : p.concurrency) {
          const std::string variant = variant_of(mode, c);
          out.add(measure_servers(
              "http", variant, threads, m, p.servers, repeats, log,
              [&p, &log, threads, c, mode, variant](const server_kind& k) {
                return measure({variant, k, threads, c, mode == "close"}, p, log);
              },
              add_ratios));
        }
        print_mode_table(out, p, mode, threads, repeats, log);
      }
    }
    for (unsigned threads : o.threads)
      for (const std::string& mode : p.modes)
        print_architecture_table(out, p, mode, threads, repeats, log);
  } catch (const std::exception& e) {
    stop_store(p);
    cannot_run("http", e.what());
  }
  stop_store(p);
  report_failures("http", log);
  if (o.plot_target.empty()) return;
  for (unsigned threads : o.threads) {
    plot_concurrency(o, out, p, threads, p.modes, chart_path(o, "-concurrency", threads));
    // With more than two servers the combined chart gets crowded: one chart per mode as well.
    if (p.servers.size() > 2)
      for (const std::string& mode : p.modes)
        plot_concurrency(o, out, p, threads, {mode}, chart_path(o, "-models-" + mode, threads));
  }
}

}  // namespace

const experiment& http_experiment() {
  static const experiment e{
      "http",
      "spoold beside nginx under wrk: requests/s, latency, server CPU.",
      "Both servers serve the same static file (--root, --file) on 127.0.0.1 to wrk. For each\n"
      "connection mode, concurrency and repeat, each server is started fresh (spoold --port 0;\n"
      "nginx from a configuration in a temporary directory, one worker per core), checked\n"
      "with one GET (status 200, the file's bytes), warmed up for 1 s at the same load, then\n"
      "measured: `wrk -t T -c C -d Ds --latency [-H 'Connection: close'] URL`, and stopped\n"
      "(SIGTERM for spoold, SIGQUIT for nginx; an exit other than 0 is noted beside its\n"
      "figures). Repeats are interleaved across\n"
      "the servers. Metric: requests/s, with latency p50/p99 (wrk's distribution), errors\n"
      "(socket errors and non-2xx/3xx responses), the server's process tree CPU (cores, from\n"
      "/proc) and wrk's own; spoold's rows add vs_nginx, the median of per-repeat ratios.\n"
      "nginx runs with keepalive_requests 100000 (its default, 1000, would close every\n"
      "keep-alive connection after 1000 requests). Needs wrk and nginx (scripts/install-deps.sh);\n"
      "not part of `all`.\n"
      "\n"
      "options:\n"
      "  --concurrency LIST  wrk connections (default 20,100,500,1000,5000; --quick 20,100,1000;\n"
      "                      --tiny 10)\n"
      "  --connection LIST   keepalive and/or close (default both)\n"
      "  --duration S        measured seconds per run, whole (default 10; --quick 3; --tiny 1)\n"
      "  --servers LIST      spoold and/or nginx (default both, in that order)\n"
      "  --models LIST       spoold architectures (--model), one row each (default: its own);\n"
      "                      `all`: epoll,iterative,forking,preforked,threaded,prethreaded,\n"
      "                      queue,poll; prethreaded-nolock: prethreaded --accept-lock off\n"
      "  --spoold PATH       the spoold binary (default: the one built beside spool-load-bench)\n"
      "  --spoold-b PATH     with --tls: a second spoold binary, measured as a third server\n"
      "                      (spoold-b) in the same interleaved repeats, with its ratios to\n"
      "                      nginx and to spoold: an A/B of a change beside the peer\n"
      "  --root DIR          the files served (default: the repository's server/site)\n"
      "  --file /PATH        the URL path requested (default /index.html); /guestbook:\n"
      "                      spoold's guestbook page, a store visit per request (SQLite\n"
      "                      unless --store)\n"
      "                      (spoold only: --servers spoold)\n"
      "  --store SPEC        the guestbook's store (with --file /guestbook): redis starts a\n"
      "                      redis-server on a free loopback port for the run (no persistence,\n"
      "                      as ZeroHTTPd's measurements) and gives every spoold\n"
      "                      redis://127.0.0.1:PORT; any other value is passed to spoold's\n"
      "                      --store as it is (default: SQLite in each spoold's directory)\n"
      "  --threads LIST      wrk threads (default 2)\n"
      "  --plot TARGET       also DIR/http-concurrency.png: req/s against concurrency (log x);\n"
      "                      with more than two servers, http-models-MODE.png per mode too\n"
      "  --tiny              concurrency 10, 1 s, one repeat, both servers (the smoke test)\n"
      "  --tls               over TLS instead (spoold --tls-only, nginx listen ssl, one\n"
      "                      throwaway certificate): per --concurrency value C (default\n"
      "                      4,64), keep-alive req/s and p99 with wrk -c C over https, and\n"
      "                      new connections/s with full and with resumed handshakes from C\n"
      "                      clients (spool-load-bench's own OpenSSL client); spoold/nginx ratios\n"
      "                      per repeat; always both servers (a --servers without either is\n"
      "                      refused)\n"
      "\n"
      "A point that fails (the server does not start or answers nothing, wrk fails or is\n"
      "killed 30 s after its duration) is recorded with its reason ('-' and a footnote) and\n"
      "the run goes on. After the tables per mode comes one in the ZeroHTTPd article's shape:\n"
      "req/s by concurrency (rows) and server or model (columns). spoold runs with "
      "--max-connections 20000 (nginx: worker_connections\n"
      "20000): the forking model then forks up to one process per connection.",
      {"--concurrency", "--connection", "--duration", "--servers", "--models", "--spoold",
       "--spoold-b", "--root", "--file", "--store", "--tls"},
      run};
  return e;
}

}  // namespace bench
