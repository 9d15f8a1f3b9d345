// cluster: spoold as a fleet behind HAProxy (cluster/fleet.py: N spoold nodes on Redis with
// Sentinel, --store-replicas 1) and the same nodes behind nginx as the balancer, against one
// node of such a fleet reached directly, under wrk, for three workloads (the static page, the
// guestbook page, a mix of guestbook reads and durable posts), with kept-alive connections and
// with a connection per request. Every measurement starts a fleet of its own on a 127.x.y.0/24
// block and free ports (and, for nginx, an nginx in front of its nodes), warms it up for 1 s,
// measures, and stops it. Then the failover time: kill -9 of the Redis primary to the first
// acknowledged post (bench/load/cluster/failover.py), repeated, with one and with two replicas.
//
// On one machine the nodes, the balancer, Redis and wrk share the cores: the figures show what
// the balancer costs and that nothing collapses as nodes are added, not how a fleet of machines
// scales.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "experiments/load_experiments.hpp"
#include "process_stats.hpp"
#include "servers/child_process.hpp"
#include "servers/compared_servers.hpp"
#include "servers/failure_log.hpp"
#include "servers/fleet_state.hpp"
#include "servers/nginx.hpp"
#include "servers/run_setup.hpp"
#include "servers/served_content.hpp"
#include "servers/server_measurement.hpp"
#include "servers/spoold.hpp"
#include "servers/tables.hpp"
#include "servers/temp_dir.hpp"
#include "servers/wrk.hpp"

namespace bench {

namespace {

constexpr unsigned warm_up_seconds = 1;
constexpr const char* direct_name = "spoold direct";

// One guestbook post in four, each with a key of its own (thread, counter and a random part:
// unique across the threads and the repeats), the rest reads of the guestbook page. wrk
// counts the posts' 303 as answers.
constexpr const char* mix_script = R"(-- the cluster mix: 3 GET /guestbook : 1 POST /guestbook
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local n = 0
local form = { ["Content-Type"] = "application/x-www-form-urlencoded" }
function init(args)
  math.randomseed(os.time() * 1000 + (tid or 0))
  salt = math.random(1, 1000000000)
end
function request()
  n = n + 1
  if n % 4 == 0 then
    local key = string.format("b%d-%d-%d", tid or 0, salt, n)
    local body = "guest-name=bench&guest-remarks=" .. key .. "&post-key=" .. key
    return wrk.format("POST", "/guestbook", form, body)
  end
  return wrk.format("GET", "/guestbook")
end
)";

struct workload {
  std::string name;
  std::string path;
  bool mix = false;
};

const std::vector<workload>& workloads() {
  static const std::vector<workload> w{{"static /", "/", false},
                                       {"guestbook GET", "/guestbook", false},
                                       {"guestbook GET/POST mix", "/guestbook", true}};
  return w;
}

[[noreturn]] void cannot_run(const std::string& what) { bench::cannot_run("cluster", what); }

// What a row measures: one node directly, or N nodes behind a balancer.
enum class balancer { none, haproxy, nginx };

struct kind_spec {
  balancer b = balancer::none;
  std::uint64_t nodes = 1;
};

std::string kind_name(balancer b, std::uint64_t nodes) {
  if (b == balancer::none) return direct_name;
  return std::string(b == balancer::haproxy ? "haproxy " : "nginx ") + std::to_string(nodes) +
         (nodes == 1 ? " node" : " nodes");
}

kind_spec spec_of(const std::string& name) {
  if (name == direct_name) return {};
  const std::size_t space = name.find(' ');
  return {name.starts_with("haproxy") ? balancer::haproxy : balancer::nginx,
          std::stoull(name.substr(space + 1))};
}

struct plan {
  std::vector<std::uint64_t> nodes;
  std::vector<std::uint64_t> concurrency;
  std::vector<std::string> modes;  // "keepalive", "close"
  std::vector<balancer> balancers;
  unsigned seconds = 10;
  unsigned wrk_slack_s = 30;
  std::uint64_t failovers = 5;
  std::string python, fleet_py, failover_py, spoold, root;
  std::unique_ptr<temp_dir> dir;  // the Lua script
  std::string script;
  std::vector<server_kind> kinds;  // names only: what a measurement starts is decided by name
};

plan make_plan(const load_options& o) {
  plan p;
  p.nodes = !o.fleet_nodes.empty()
                ? o.fleet_nodes
                : o.by_size<std::vector<std::uint64_t>>({1, 2, 3}, {1, 2, 3}, {1});
  p.concurrency = !o.concurrency.empty()
                      ? o.concurrency
                      : std::vector<std::uint64_t>{o.by_size<std::uint64_t>(100, 100, 10)};
  p.modes = !o.connection_modes.empty()
                ? o.connection_modes
                : o.by_size<std::vector<std::string>>({"keepalive", "close"},
                                                      {"keepalive", "close"}, {"keepalive"});
  const std::vector<std::string> balancers =
      !o.balancers.empty() ? o.balancers : std::vector<std::string>{"haproxy", "nginx"};
  for (const std::string& b : balancers)
    p.balancers.push_back(b == "haproxy" ? balancer::haproxy : balancer::nginx);
  p.seconds = whole_seconds(o, o.by_size(10.0, 3.0, 1.0), "cluster", " (wrk's -d)");
  p.wrk_slack_s = o.by_size(30u, 30u, 10u);
  p.failovers = o.failovers ? *o.failovers : o.by_size<std::uint64_t>(5, 5, 1);

  require_program("cluster", "wrk");
  p.python = on_path("python3");
  if (p.python.empty()) cannot_run("python3 is not installed; scripts/install-deps.sh installs it");
  for (const char* program :
       {"/usr/sbin/haproxy", "/usr/bin/redis-server", "/usr/bin/redis-sentinel", nginx_binary})
    if (!is_executable(program))
      cannot_run(std::string(program) + " is not installed; scripts/install-deps.sh installs it");
  p.fleet_py = std::string(SPOOL_LOAD_BENCH_SOURCE) + "/cluster/fleet.py";
  p.failover_py = std::string(SPOOL_LOAD_BENCH_SOURCE) + "/bench/load/cluster/failover.py";
  for (const std::string& script : {p.fleet_py, p.failover_py})
    if (read_file(script).empty()) cannot_run("cannot read " + script);
  p.spoold = spoold_binary(o);
  if (p.spoold.empty() || !is_executable(p.spoold))
    cannot_run("no spoold binary (build the spoold target, or pass --spoold PATH)");
  p.root = served_root(o);

  p.dir = std::make_unique<temp_dir>("spool-load-bench-cluster");
  p.script = p.dir->file("mix.lua");
  write_file(p.script, mix_script);
  p.kinds.push_back({direct_name, {}});
  for (balancer b : p.balancers)
    for (std::uint64_t n : p.nodes) p.kinds.push_back({kind_name(b, n), {}});
  return p;
}

// A fleet for one measurement, brought up by `fleet.py up` and stopped by `fleet.py down`
// whatever happens (the destructor).
class fleet_run {
 public:
  fleet_run(const plan& p, std::uint64_t nodes) : p_(p), dir_("spool-load-bench-fleet") {
    std::random_device random;
    const std::string prefix =
        "127." + std::to_string(100 + random() % 155) + "." + std::to_string(1 + random() % 254);
    state_ = dir_.file("state");
    // Even a failed or killed up may have left pid files: down stops what runs. A constructor
    // that throws runs no destructor, so it calls down itself (once `up` is killed and reaped).
    try {
      {
        child_process up(child_process::launch{
            {p.python, p.fleet_py, "up", "--dir", state_, "--nodes", std::to_string(nodes),
             "--spoold", p.spoold, "--site", p.root, "--prefix", prefix, "--free-ports"},
            "",
            true,
            true,
            ""});
        const std::optional<std::string> text =
            up.read_all(child_process::clock::now() + std::chrono::seconds(180));
        if (!text) throw std::runtime_error("fleet.py up did not finish within 180 s");
        const exit_status status = up.wait();
        if (!status.ok())
          throw std::runtime_error("fleet.py up: " + status.describe() + ": " + *text);
      }
      // Where each part listens, from the fleet's own record rather than from what `up`
      // prints for people.
      const fleet_state state = read_fleet_state(state_ + "/state.json");
      if (state.nodes.empty() || state.nodes.size() != nodes)
        throw std::runtime_error("fleet.py up started " + std::to_string(state.nodes.size()) +
                                 " nodes, not " + std::to_string(nodes));
      haproxy_ = "http://" + state.haproxy.text() + "/";
      for (const fleet_endpoint& n : state.nodes) nodes_.push_back(n.text());
      node_ = "http://" + nodes_.front() + "/";
    } catch (...) {
      down();
      throw;
    }
  }
  ~fleet_run() { down(); }
  fleet_run(const fleet_run&) = delete;
  fleet_run& operator=(const fleet_run&) = delete;

  // "http://ADDR:PORT/" of HAProxy and of the first node; "ADDR:PORT" of every node.
  const std::string& haproxy() const { return haproxy_; }
  const std::string& node() const { return node_; }
  const std::vector<std::string>& nodes() const { return nodes_; }

 private:
  // `fleet.py down`: stops everything the fleet's pid files name.
  void down() noexcept {
    try {
      child_process down(child_process::launch{
          {p_.python, p_.fleet_py, "down", "--dir", state_}, "", true, true, ""});
      const std::optional<std::string> text =
          down.read_all(child_process::clock::now() + std::chrono::seconds(120));
      const exit_status status = down.wait();
      if (!status.ok())
        std::fprintf(stderr, "spool-load-bench cluster: fleet.py down: %s: %s\n",
                     status.describe().c_str(), text ? text->c_str() : "");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "spool-load-bench cluster: fleet.py down: %s\n", e.what());
    }
  }

  const plan& p_;
  temp_dir dir_;
  std::string state_, haproxy_, node_;
  std::vector<std::string> nodes_;
};

// nginx as the balancer in front of the fleet's nodes, one worker per core (as spoold's loops).
std::unique_ptr<running_server> start_nginx_balancer(const std::vector<std::string>& nodes) {
  nginx_settings s;
  s.upstreams = nodes;
  s.workers = online_cpus();
  return start_nginx(s);
}

sample measure(const plan& p, const std::string& kind, const workload& w, std::uint64_t c,
               bool close, unsigned threads, failure_log& log, const std::string& variant) {
  const kind_spec k = spec_of(kind);
  const fleet_run f(p, k.nodes);
  std::unique_ptr<running_server> lb;
  std::string base;
  if (k.b == balancer::nginx) {
    lb = start_nginx_balancer(f.nodes());
    base = "http://127.0.0.1:" + std::to_string(lb->port());
  } else {
    base = k.b == balancer::haproxy ? f.haproxy() : f.node();
    base.pop_back();  // the trailing '/'
  }
  wrk_settings s;
  s.url = base + w.path;
  s.threads = threads;
  s.connections = static_cast<unsigned>(c);
  s.close_connections = close;
  s.slack_seconds = p.wrk_slack_s;
  if (w.mix) s.script = p.script;
  s.seconds = warm_up_seconds;
  const wrk_result warm = run_wrk(s);
  if (warm.requests == 0) log.remark(variant, kind, threads, "warm-up: no request answered");
  s.seconds = p.seconds;
  const wrk_result r = run_wrk(s);
  if (r.requests == 0)
    throw point_failure("no request answered in " + std::to_string(p.seconds) + " s");
  if (lb) lb->stop();
  return {r.requests_per_s,
          {{"p50_ms", r.p50_ms},
           {"p99_ms", r.p99_ms},
           {"errors", static_cast<double>(r.errors())},
           {"requests", static_cast<double>(r.requests)}}};
}

std::string variant_of(const workload& w, std::uint64_t c, const std::string& mode) {
  return w.name + (mode == "close" ? ", close" : ", keep-alive") + " c=" + std::to_string(c);
}

// req/s (p99 ms) by workload (rows) and server (columns).
void print_summary(const results& res, const plan& p, unsigned threads, int repeats,
                   const failure_log& log) {
  std::vector<std::string> head{"workload"};
  for (const server_kind& k : p.kinds) head.push_back(k.name);
  std::vector<std::vector<std::string>> cells{head};
  footnotes notes;
  for (const std::string& mode : p.modes) {
    for (const workload& w : workloads()) {
      for (std::uint64_t c : p.concurrency) {
        const std::string variant = variant_of(w, c, mode);
        std::vector<std::string> line{variant};
        for (const server_kind& k : p.kinds) {
          const row* r = find_row(res, "cluster", variant, k.name, threads);
          const std::string note = notes.mark(log.notes(variant, k.name, threads));
          if (r == nullptr || !r->ran()) {
            line.push_back("-" + note);
            continue;
          }
          line.push_back(human(r->value().median) + " (p99 " +
                         fixed(r->extra("p99_ms")->median, 1) + " ms)" + note);
        }
        cells.push_back(std::move(line));
      }
    }
  }
  std::printf(
      "\n== cluster: req/s (p99) through HAProxy, through nginx and directly to one node of "
      "such a fleet; wrk -t %u, %u s per run, median of %d ==\n"
      "   every process (nodes, balancer, Redis, Sentinels, wrk) shares this machine's cores:\n"
      "   the figures show the balancer's cost and that nothing collapses, not scaling\n",
      threads, p.seconds, repeats);
  print_cells(cells, {0});
  notes.print(stdout);
  std::fflush(stdout);
}

// bench/load/cluster/failover.py's repeats, one row per number of Redis replicas (posts with
// --store-replicas 1 either way).
row measure_failovers(const plan& p, int replicas, unsigned threads) {
  row r;
  r.experiment = "cluster";
  r.variant = "failover: kill -9 primary to first acknowledged post";
  r.peer = std::to_string(replicas) + (replicas == 1 ? " replica" : " replicas");
  r.threads = threads;
  r.m = {"time", "s", false};
  progress("cluster failover, %d Redis replica(s): %llu repeat(s)", replicas,
           static_cast<unsigned long long>(p.failovers));
  child_process run(child_process::launch{
      {p.python, p.failover_py, "--spoold", p.spoold, "--site", p.root, "--repeat",
       std::to_string(p.failovers), "--redis-replicas", std::to_string(replicas)},
      "",
      true,
      false,
      ""});
  const auto limit = std::chrono::seconds(180 + 240 * p.failovers);
  const std::optional<std::string> text = run.read_all(child_process::clock::now() + limit);
  if (!text) {
    run.signal_group(SIGINT);  // failover.py stops its fleet on the way out (finally)
    r.not_available = "failed: failover.py did not finish in time";
    return r;
  }
  const exit_status status = run.wait();
  constexpr std::string_view marker = "seconds=";
  const std::size_t at = text->rfind(marker);
  if (!status.ok() || at == std::string::npos) {
    r.not_available = "failed: failover.py " + status.describe() + " (its stderr says why)";
    return r;
  }
  std::string list = text->substr(at + marker.size());
  while (!list.empty()) {
    const std::size_t comma = list.find_first_of(",\n");
    const std::string one = list.substr(0, comma);
    if (!one.empty()) r.samples.push_back({std::stod(one), {}});
    if (comma == std::string::npos || list[comma] == '\n') break;
    list.erase(0, comma + 1);
  }
  if (r.samples.empty()) r.not_available = "failed: failover.py reported no time";
  return r;
}

void run(const load_options& o, results& out) {
  const plan p = make_plan(o);
  const int repeats = repeat_count(o);
  const unsigned threads = o.threads.front();
  std::printf(
      "# cluster:  fleets of %s node(s) behind HAProxy and nginx, and one node directly; "
      "%s; %s\n",
      [&] {
        std::string s;
        for (std::uint64_t n : p.nodes) s += (s.empty() ? "" : ",") + std::to_string(n);
        return s;
      }()
          .c_str(),
      p.spoold.c_str(), version_line("haproxy", "-v").c_str());
  std::fflush(stdout);
  raise_open_file_limit(*std::max_element(p.concurrency.begin(), p.concurrency.end()), "cluster");
  const metric m{"throughput", "req/s", true};
  failure_log log;
  for (const std::string& mode : p.modes) {
    for (const workload& w : workloads()) {
      for (std::uint64_t c : p.concurrency) {
        const std::string variant = variant_of(w, c, mode);
        const bool close = mode == "close";
        std::vector<contender> cs =
            server_contenders("cluster", variant, p.kinds, threads, log,
                              [&p, &w, &log, c, close, threads, variant](const server_kind& k) {
                                return measure(p, k.name, w, c, close, threads, log, variant);
                              });
        std::vector<row> rows =
            measure_point("cluster", variant, threads, m, std::move(cs), repeats);
        log.settle(rows);
        out.add(std::move(rows));
      }
    }
  }
  print_summary(out, p, threads, repeats, log);
  if (p.failovers > 0) {
    std::vector<row> rows;
    for (int replicas : {1, 2}) rows.push_back(measure_failovers(p, replicas, threads));
    out.add(std::move(rows));
  }
  report_failures("cluster", log);
}

}  // namespace

const experiment& cluster_experiment() {
  static const experiment e{
      "cluster",
      "spoold behind HAProxy and nginx (1..3 nodes on Redis with Sentinel) under wrk; failover.",
      "Each measurement starts a fleet of its own with cluster/fleet.py (N spoold nodes with\n"
      "--store redis-sentinel://... --store-replicas 1, a Redis primary and two replicas with\n"
      "appendfsync always, three Sentinels, HAProxy) on a random 127.x.y.0/24 block and free\n"
      "ports, warms it up for 1 s at the same load, runs `wrk -t T -c C -d Ds --latency`, and\n"
      "stops it. Rows: `haproxy N nodes` (through the fleet's HAProxy), `nginx N nodes` (the\n"
      "same fleet's nodes behind nginx instead: an upstream with keepalive 128, HTTP/1.1, one\n"
      "worker per core, no access log) and `spoold direct` (one node of a one-node fleet,\n"
      "reached without a balancer: the balancer's cost). Workloads: `static /` (the site's\n"
      "index), `guestbook GET` (a Redis visit per request), `guestbook GET/POST mix` (3 reads :\n"
      "1 post, each post with a key of its own, acknowledged once a replica has it); each with\n"
      "kept-alive client connections and with Connection: close (a connection per request).\n"
      "Metric: requests/s, with p50/p99 (wrk's distribution) and errors.\n"
      "Then, unless --failovers 0: bench/load/cluster/failover.py, kill -9 of the Redis\n"
      "primary to the first post acknowledged through HAProxy (posts sent after the kill),\n"
      "repeated, with one Redis replica (the old primary is started again at once: no post\n"
      "can be confirmed before it is back) and with two; median and min-max in seconds.\n"
      "All parts share this machine's cores: the figures show the balancer's cost and that\n"
      "nothing collapses as nodes are added, not how machines scale. Needs wrk, haproxy, nginx,\n"
      "redis-server, redis-sentinel, python3 (scripts/install-deps.sh); not part of `all`.\n"
      "\n"
      "options:\n"
      "  --nodes LIST        fleet sizes behind the balancers (default 1,2,3; --tiny 1)\n"
      "  --balancers LIST    haproxy and/or nginx (default both)\n"
      "  --connection LIST   keepalive and/or close (default both; --tiny keepalive)\n"
      "  --concurrency LIST  wrk connections (default 100; --tiny 10)\n"
      "  --duration S        measured seconds per run, whole (default 10; --quick 3; --tiny 1)\n"
      "  --failovers N       failovers timed with one and with two replicas (default 5;\n"
      "                      --tiny 1; 0: none)\n"
      "  --threads N         wrk threads (default 2; the first value of a list)\n"
      "  --spoold PATH       the spoold binary (default: the one built beside spool-load-bench)\n"
      "  --root DIR          the site the nodes serve (default: the repository's server/site)\n"
      "  --tiny              one node, keep-alive, concurrency 10, 1 s, one repeat, one\n"
      "                      failover each\n"
      "\n"
      "A fleet left behind by a killed spool-load-bench runs from a directory\n"
      "spool-load-bench-fleet-* under $TMPDIR: `python3 cluster/fleet.py down --dir DIR/state`\n"
      "stops it.",
      {"--nodes", "--balancers", "--connection", "--concurrency", "--duration", "--failovers",
       "--spoold", "--root"},
      run};
  return e;
}

}  // namespace bench
