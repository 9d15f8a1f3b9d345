// http: spoold beside nginx, both serving the same static file to wrk over loopback. For each
// connection mode (keep-alive, or one request per connection) and each concurrency, every
// server is started fresh, warmed up for 1 s, measured for --duration seconds and stopped;
// repeats are interleaved across the servers. Figures: requests/s, latency p50 and p99, errors,
// and the CPU the server's whole process tree used (cores), from /proc.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "experiments/experiments.hpp"
#include "plot.hpp"
#include "process_stats.hpp"
#include "servers/http_probe.hpp"
#include "servers/nginx.hpp"
#include "servers/spoold.hpp"
#include "servers/temp_dir.hpp"
#include "servers/wrk.hpp"

namespace bench {

namespace {

#ifdef SPOOL_BENCH_SPOOLD
constexpr const char* built_spoold = SPOOL_BENCH_SPOOLD;  // $<TARGET_FILE:spoold>
#else
constexpr const char* built_spoold = "";
#endif
#ifdef SPOOL_BENCH_SITE
constexpr const char* repository_site = SPOOL_BENCH_SITE;  // the repository's server/site
#else
constexpr const char* repository_site = "";
#endif

constexpr const char* nginx_binary = "/usr/sbin/nginx";
constexpr unsigned warm_up_seconds = 1;

[[noreturn]] void cannot_run(const std::string& what) {
  std::fprintf(stderr, "spool-bench http: %s\n", what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

// What every measurement of a run shares.
struct plan {
  std::vector<std::uint64_t> concurrency;
  std::vector<std::string> modes;  // "keepalive", "close"
  unsigned seconds = 10;
  std::string root, url_path, body;
  std::vector<server_kind> servers;  // in the order each repeat runs them
};

bool is_executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// Where the shell would find `program`, or "" if nowhere.
std::string on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, colon - start) + "/" + program;
    if (colon > start && is_executable(candidate)) return candidate;
    start = colon + 1;
  }
  return "";
}

// wrk and the servers hold one descriptor per connection: raise the soft limit to the hard one
// (children inherit it) and say so if that is still short of the highest concurrency.
void raise_open_file_limit(std::uint64_t connections) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
    cannot_run(std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
      cannot_run(std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < connections + 100)
    std::fprintf(stderr,
                 "spool-bench http: warning: the open-file limit (%llu) is below %llu "
                 "connections plus slack; expect connect errors (raise `ulimit -Hn`)\n",
                 static_cast<unsigned long long>(lim.rlim_cur),
                 static_cast<unsigned long long>(connections));
}

std::vector<server_kind> server_kinds(const options& o, const plan& p) {
  const std::vector<std::string> names =
      o.servers.empty() ? std::vector<std::string>{"spoold", "nginx"} : o.servers;
  std::vector<server_kind> kinds;
  for (const std::string& name : names) {
    if (name == "nginx") {
      nginx_settings s;
      s.binary = nginx_binary;
      s.root = p.root;
      s.workers = online_cpus();  // as many as spoold's event loops (its --loops default)
      kinds.push_back({"nginx", [s] { return start_nginx(s); }});
      continue;
    }
    const std::string binary = o.spoold_path.empty() ? built_spoold : o.spoold_path;
    // One row per model: "spoold" for its default, "spoold (NAME)" for each --models value.
    const std::vector<std::string> models =
        o.spoold_models.empty() ? std::vector<std::string>{""} : o.spoold_models;
    for (const std::string& model : models) {
      const spoold_settings s{binary, p.root, model};
      kinds.push_back(
          {model.empty() ? "spoold" : "spoold (" + model + ")", [s] { return start_spoold(s); }});
    }
  }
  return kinds;
}

// Everything that would make a run fail half-way is checked before the first server starts.
void check_prerequisites(const options& o, const plan& p) {
  if (on_path("wrk").empty())
    cannot_run("wrk is not installed (not on PATH); scripts/install-deps.sh installs it");
  for (const std::string& name :
       o.servers.empty() ? std::vector<std::string>{"spoold", "nginx"} : o.servers) {
    if (name == "nginx" && !is_executable(nginx_binary))
      cannot_run(std::string(nginx_binary) +
                 " is missing; scripts/install-deps.sh installs nginx (or leave it out: "
                 "--servers spoold)");
    if (name != "spoold") continue;
    const std::string binary = o.spoold_path.empty() ? built_spoold : o.spoold_path;
    if (binary.empty()) cannot_run("this spool-bench was built without spoold: pass --spoold PATH");
    if (!is_executable(binary))
      cannot_run("no spoold at " + binary +
                 (o.spoold_path.empty()
                      ? ": build it (cmake --build BUILD --target spoold) or pass --spoold PATH"
                      : ""));
  }
  const std::string file = p.root + p.url_path;
  if (!std::filesystem::is_regular_file(file))
    cannot_run("no file " + file + " to serve (--root DIR, --file /PATH)");
}

plan make_plan(const options& o) {
  plan p;
  p.concurrency = !o.concurrency.empty()      ? o.concurrency
                  : o.size == size_mode::tiny ? std::vector<std::uint64_t>{10}
                  : o.size == size_mode::quick
                      ? std::vector<std::uint64_t>{20, 100, 1000}
                      : std::vector<std::uint64_t>{20, 100, 500, 1000, 5000};
  p.modes = o.connection_modes.empty() ? std::vector<std::string>{"keepalive", "close"}
                                       : o.connection_modes;
  const double seconds = o.duration_s ? *o.duration_s : o.by_size(10.0, 3.0, 1.0);
  if (seconds < 1 || seconds != std::floor(seconds) || seconds > 3600) {
    std::fprintf(stderr,
                 "spool-bench http: --duration wants whole seconds in 1..3600 (wrk's -d)\n");
    std::exit(2);
  }
  p.seconds = static_cast<unsigned>(seconds);
  p.root = o.site_root.empty() ? repository_site : o.site_root;
  p.url_path = o.url_path.empty() ? "/index.html" : o.url_path;
  check_prerequisites(o, p);
  p.body = read_file(p.root + p.url_path);
  p.servers = server_kinds(o, p);
  return p;
}

wrk_settings load(const std::string& url, unsigned threads, std::uint64_t connections,
                  unsigned seconds, bool close) {
  wrk_settings w;
  w.url = url;
  w.threads = threads;
  w.connections = static_cast<unsigned>(connections);
  w.seconds = seconds;
  w.close_connections = close;
  return w;
}

// One measurement: a fresh server, a probe GET (status 200 and the file's bytes), 1 s of
// warm-up at the same load, the measured run, and a graceful stop (a server that crashes or
// hangs on the way out fails the run).
sample measure(const server_kind& kind, const plan& p, unsigned threads, std::uint64_t connections,
               bool close) {
  const std::unique_ptr<running_server> server = kind.start();
  expect_file_served(server->port(), p.url_path, p.body);
  const std::string url = "http://127.0.0.1:" + std::to_string(server->port()) + p.url_path;

  // Errors under load are the measured run's to report; a server that answers nothing at all
  // is broken, and its figures would mean nothing.
  if (run_wrk(load(url, threads, connections, warm_up_seconds, close)).requests == 0)
    throw std::runtime_error(kind.name + " answered no request in the warm-up");

  const double cpu_before = server->cpu_seconds();
  const wrk_result r = run_wrk(load(url, threads, connections, p.seconds, close));
  const double cpu_after = server->cpu_seconds();
  server->stop();
  if (r.requests == 0) throw std::runtime_error(kind.name + " answered no requests");
  return {r.requests_per_s,
          {{"p50_ms", r.p50_ms},
           {"p99_ms", r.p99_ms},
           {"errors", static_cast<double>(r.errors())},
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
  if (nginx == rows.end()) return;
  for (row& r : rows) {
    if (&r == &*nginx || !r.ran()) continue;
    std::vector<double> ratios;
    for (std::size_t i = 0; i < r.samples.size() && i < nginx->samples.size(); ++i)
      if (nginx->samples[i].value > 0)
        ratios.push_back(r.samples[i].value / nginx->samples[i].value);
    if (!ratios.empty()) r.derived.emplace_back("vs_nginx", summarize(ratios).median);
  }
}

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The table the experiment is read from: per connection mode and wrk thread count, one line
// per concurrency and server.
void print_mode_table(const results& res, const plan& p, const std::string& mode, unsigned threads,
                      int repeats) {
  std::vector<std::vector<std::string>> cells{{"concurrency", "server", "req/s", "min-max",
                                               "p50 ms", "p99 ms", "errors", "server cores",
                                               "wrk cores", "vs nginx"}};
  for (std::uint64_t c : p.concurrency) {
    for (const row& r : res.rows()) {
      if (r.experiment != "http" || r.variant != variant_of(mode, c) || r.threads != threads)
        continue;
      if (!r.ran()) continue;
      const summary v = r.value();
      std::string ratio;
      for (const auto& [name, value] : r.derived)
        if (name == "vs_nginx") ratio = fixed(value, 2) + "x";
      const summary errors = *r.extra("errors");
      cells.push_back({std::to_string(c), r.peer, human(v.median),
                       human(v.min) + "-" + human(v.max), fixed(r.extra("p50_ms")->median, 3),
                       fixed(r.extra("p99_ms")->median, 3),
                       human(errors.median) +
                           (errors.max > errors.median ? " (max " + human(errors.max) + ")" : ""),
                       fixed(r.extra("server_cores")->median, 2),
                       fixed(r.extra("client_cores")->median, 2), ratio});
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
  std::vector<std::size_t> width(cells[0].size(), 0);
  for (const auto& line : cells)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  for (const auto& line : cells) {
    std::string text;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const bool left = i == 1 || i == 3;  // server name and range
      const std::string pad(width[i] - line[i].size(), ' ');
      text += (left ? line[i] + pad : pad + line[i]) + "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    std::printf("%s\n", text.c_str());
  }
  std::fflush(stdout);
}

// req/s against concurrency (log scale), one line per server and connection mode.
void plot_concurrency(const options& o, const results& res, const plan& p, unsigned threads) {
  line_chart chart;
  chart.title = "http: requests/s against concurrency, wrk -t " + std::to_string(threads) + ", " +
                std::to_string(p.seconds) + " s per run, median of " +
                std::to_string(o.repeat_time_bound()) + " (keep-alive solid, close dashed)";
  chart.x_label = "concurrent connections (log scale)";
  chart.y_label = "requests/s";
  chart.log_x = true;
  chart.points = true;
  for (const std::string& mode : p.modes)
    for (const server_kind& k : p.servers) {
      chart.series.push_back({k.name + " " + mode, false, mode == "close"});
      chart.colours.push_back(colour_of(k.name));
    }
  for (std::uint64_t c : p.concurrency) {
    std::vector<double> values{static_cast<double>(c)};
    for (const std::string& mode : p.modes) {
      for (const server_kind& k : p.servers) {
        double v = NAN;
        for (const row& r : res.rows())
          if (r.experiment == "http" && r.variant == variant_of(mode, c) && r.peer == k.name &&
              r.threads == threads && r.ran())
            v = r.value().median;
        values.push_back(v);
      }
    }
    chart.rows.push_back(std::move(values));
  }
  const std::string path =
      companion_path(plot_path(o.plot_target, "http", false), "-concurrency", ".png");
  plot_lines(chart, threads == o.threads.front()
                        ? path
                        : companion_path(path, "-t" + std::to_string(threads), ".png"));
}

void print_versions(const plan& p) {
  std::string line = "# http:     " + std::to_string(p.concurrency.size()) +
                     " concurrency value(s) x " + std::to_string(p.modes.size()) +
                     " mode(s); servers:";
  for (const server_kind& k : p.servers) line += " " + k.name;
  std::printf("%s\n# serving:  %s%s (%zu bytes)\n", line.c_str(), p.root.c_str(),
              p.url_path.c_str(), p.body.size());
  const std::string wrk = version_line("wrk", "-v");
  std::printf("# load:     %s\n", wrk.empty() ? "wrk (version unknown)" : wrk.c_str());
  for (const server_kind& k : p.servers) {
    if (k.name == "nginx") {
      std::printf("# nginx:    %s, %u worker processes\n", version_line(nginx_binary, "-v").c_str(),
                  online_cpus());
    }
  }
  std::fflush(stdout);
}

void run(const options& o, results& out) {
  const plan p = make_plan(o);
  print_versions(p);
  raise_open_file_limit(*std::max_element(p.concurrency.begin(), p.concurrency.end()));
  const metric m{"throughput", "req/s", true};
  const int repeats = o.size == size_mode::tiny && !o.repeat_given ? 1 : o.repeat_time_bound();
  try {
    for (unsigned threads : o.threads) {
      for (const std::string& mode : p.modes) {
        for (std::uint64_t c : p.concurrency) {
          std::vector<contender> cs;
          for (const server_kind& k : p.servers)
            cs.push_back({variant_of(mode, c), k.name, {}, [&p, &k, threads, c, mode] {
                            return measure(k, p, threads, c, mode == "close");
                          }});
          std::vector<row> rows =
              measure_point("http", variant_of(mode, c), threads, m, std::move(cs), repeats);
          add_ratios(rows);
          out.add(std::move(rows));
        }
        print_mode_table(out, p, mode, threads, repeats);
      }
    }
  } catch (const std::exception& e) {
    cannot_run(e.what());
  }
  if (!o.plot_target.empty())
    for (unsigned threads : o.threads) plot_concurrency(o, out, p, threads);
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
      "(SIGTERM for spoold, SIGQUIT for nginx; it must exit 0). Repeats are interleaved across\n"
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
      "  --models LIST       spoold architectures (--model), one row each (default: its own)\n"
      "  --spoold PATH       the spoold binary (default: the one built beside spool-bench)\n"
      "  --root DIR          the files served (default: the repository's server/site)\n"
      "  --file /PATH        the URL path requested (default /index.html)\n"
      "  --threads LIST      wrk threads (default 2)\n"
      "  --plot TARGET       also DIR/http-concurrency.png: req/s against concurrency (log x)\n"
      "  --tiny              concurrency 10, 1 s, one repeat, both servers (the smoke test)",
      {"--concurrency", "--connection", "--duration", "--servers", "--models", "--spoold", "--root",
       "--file"},
      run};
  return e;
}

}  // namespace bench
