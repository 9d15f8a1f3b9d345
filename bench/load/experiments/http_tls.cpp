// http --tls: spoold (--tls-only, its default model) beside nginx (listen ... ssl), both with
// the same throwaway certificate (ECDSA P-256, made with the openssl command for the run) and
// the same TLS settings: TLS 1.2 and 1.3, ECDHE + AEAD ciphers for 1.2, server cipher order,
// session tickets and a session cache. Three loads per repeat, each server started fresh for
// each and warmed up for 1 s at the same load, the servers interleaved:
//   keepalive  wrk over https, C connections, requests/s
//   full       new connections per second, a full handshake each (tls_client.hpp, C clients)
//   resumed    the same, each connection resuming the session of the one before it
// for each C of --concurrency (default 4,64).
// Table: min/median/max per server, the server's CPU per request or connection (its process
// tree's, over the measured run: what the server spends, whatever share of the cores the
// clients on the same machine take), and spoold/nginx as the median (min, max) of the
// per-repeat ratios of both. --spoold-b adds a second spoold binary as a third server, with its
// ratios to nginx and to spoold: an A/B of a change beside the peer.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "experiments/http_tls.hpp"
#include "process_stats.hpp"
#include "results.hpp"
#include "servers/compared_servers.hpp"
#include "servers/nginx.hpp"
#include "servers/run_setup.hpp"
#include "servers/served_content.hpp"
#include "servers/spoold.hpp"
#include "servers/temp_dir.hpp"
#include "servers/tls_client.hpp"
#include "servers/wrk.hpp"

namespace bench {
namespace {

// The most client threads of the handshake loads (each holds one blocking connection).
constexpr std::uint64_t max_handshake_clients = 256;
constexpr unsigned warm_up_seconds = 1;

// A CA-less self-signed certificate for 127.0.0.1 (the clients here do not verify: speed only).
void make_certificate(const temp_dir& dir) {
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2"
      " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout '" +
      dir.file("key.pem") + "' -out '" + dir.file("cert.pem") + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    cannot_run("http", "the openssl command could not make a certificate (install openssl)");
  }
}

struct tls_sample {
  double value = 0;   // req/s or connections/s
  double cpu_us = 0;  // the server's CPU per request or connection, µs (0: none completed)
  double p99_ms = 0;  // keep-alive: wrk's 99th percentile latency (0: handshake loads)
  std::string note;   // errors, resumption misses
};

// CPU per operation in µs, or 0 when none completed.
double per_operation_us(double cpu_s, double operations) {
  return operations > 0 ? cpu_s * 1e6 / operations : 0;
}

tls_sample measure_tls_point(const server_kind& kind, const std::string& load,
                             std::uint64_t connections, unsigned seconds, const std::string& path) {
  std::unique_ptr<running_server> server = kind.start();
  tls_sample s;
  if (load == "keepalive") {
    wrk_settings w;
    w.url = "https://127.0.0.1:" + std::to_string(server->port()) + path;
    w.threads = 2;
    w.connections = static_cast<unsigned>(connections);
    w.seconds = warm_up_seconds;
    (void)run_wrk(w);
    w.seconds = seconds;
    const double cpu_before = server->cpu_seconds();
    const wrk_result r = run_wrk(w);
    s.cpu_us =
        per_operation_us(server->cpu_seconds() - cpu_before, static_cast<double>(r.requests));
    s.value = r.requests_per_s;
    s.p99_ms = r.p99_ms;
    if (r.errors() > 0) s.note = std::to_string(r.errors()) + " errors";
  } else {
    handshake_load h;
    h.port = server->port();
    h.path = path;
    h.clients = static_cast<unsigned>(std::min(connections, max_handshake_clients));
    h.resume = load == "resumed";
    h.seconds = warm_up_seconds;
    (void)run_handshakes(h);
    h.seconds = seconds;
    const double cpu_before = server->cpu_seconds();
    const handshake_result r = run_handshakes(h);
    s.cpu_us =
        per_operation_us(server->cpu_seconds() - cpu_before, static_cast<double>(r.completed));
    s.value = r.per_s;
    if (r.failed > 0) s.note = std::to_string(r.failed) + " failed";
    if (h.resume && r.resumed + h.clients < r.completed) {
      // Each client's first connection is full; every later one should resume.
      s.note +=
          (s.note.empty() ? "" : ", ") + std::to_string(r.completed - r.resumed) + " not resumed";
    }
  }
  server->stop();
  return s;
}

}  // namespace

void run_http_tls(const load_options& o) {
  require_program("http", "wrk");
  temp_dir certs("spool-load-bench-tls");
  make_certificate(certs);
  const std::string cert = certs.file("cert.pem");
  const std::string key = certs.file("key.pem");
  const std::string root = served_root(o);
  const std::string path = served_url_path(o);
  if (is_guestbook(path)) cannot_run("http", "--tls compares file serving: leave --file out");
  // Every ratio is to nginx, and spoold is what is measured: a --servers that leaves either
  // out would be ignored, so it is refused instead.
  if (!o.servers.empty() &&
      (std::find(o.servers.begin(), o.servers.end(), "spoold") == o.servers.end() ||
       std::find(o.servers.begin(), o.servers.end(), "nginx") == o.servers.end())) {
    cannot_run("http", "--tls measures spoold beside nginx (and --spoold-b): leave --servers out");
  }

  spoold_settings sp;
  sp.binary = spoold_binary(o);
  sp.root = root;
  sp.extra_args = {"--tls-only", "on", "--tls-cert",        cert,
                   "--tls-key",  key,  "--max-connections", "20000"};
  nginx_settings ng;
  ng.root = root;
  ng.workers = online_cpus();  // as many as spoold's event loops
  ng.tls_cert = cert;
  ng.tls_key = key;
  std::vector<server_kind> servers{{"spoold", [sp] { return start_spoold(sp); }},
                                   {"nginx", [ng] { return start_nginx(ng); }}};
  if (!o.spoold_b_path.empty()) {
    spoold_settings b = sp;
    b.binary = o.spoold_b_path;
    servers.push_back({"spoold-b", [b] { return start_spoold(b); }});
  }

  const std::vector<std::uint64_t> concurrency =
      o.concurrency.empty() ? std::vector<std::uint64_t>{4, 64} : o.concurrency;
  const unsigned seconds = whole_seconds(o, o.by_size(10.0, 3.0, 1.0), "http", "");
  const int repeats = repeat_count(o);
  const std::vector<std::string> loads{"keepalive", "full", "resumed"};

  std::printf(
      "== http --tls: spoold (epoll, --tls-only) vs nginx %u workers, %s, %u s per run "
      "after %u s of warm-up, %d repeats\n",
      ng.workers, path.c_str(), seconds, warm_up_seconds, repeats);
  std::printf(
      "   keepalive: wrk -t 2 -c C over https (req/s); full/resumed: C clients, one GET "
      "per new connection (connections/s); cpu: the server's CPU per request or connection "
      "(us, median), which the clients' share of the cores does not move; p99: keep-alive "
      "latency, wrk's 99th percentile (ms, median)\n");
  std::printf("%-10s %5s %-8s %10s %10s %10s %8s %8s   %s\n", "load", "C", "server", "min",
              "median", "max", "cpu", "p99",
              "over nginx, median (min..max) of the repeats: rate, cpu | notes");
  int failed_points = 0;  // no figure, failed connections, or sessions not resumed
  for (const std::uint64_t connections : concurrency)
    for (const std::string& load : loads) {
      std::vector<std::vector<double>> values(servers.size());
      std::vector<std::vector<double>> cpu(servers.size());
      std::vector<std::vector<double>> p99(servers.size());
      // Per server, its ratios in each repeat: to nginx (servers[1]), and spoold-b's to spoold.
      std::vector<std::vector<double>> ratios(servers.size()), cpu_ratios(servers.size());
      std::vector<double> b_ratios, b_cpu_ratios;
      std::string notes;
      for (int r = 0; r < repeats; ++r) {
        std::vector<tls_sample> this_repeat(servers.size());
        // Alternate which server goes first, so neither always runs on a cooler machine.
        for (std::size_t i = 0; i < servers.size(); ++i) {
          const std::size_t k = (r % 2 == 0) ? i : servers.size() - 1 - i;
          const tls_sample s = measure_tls_point(servers[k], load, connections, seconds, path);
          values[k].push_back(s.value);
          if (s.cpu_us > 0) cpu[k].push_back(s.cpu_us);
          if (s.p99_ms > 0) p99[k].push_back(s.p99_ms);
          this_repeat[k] = s;
          if (!s.note.empty()) notes += " " + servers[k].name + ": " + s.note + ";";
          if (s.value <= 0 || !s.note.empty()) ++failed_points;
          std::fflush(stdout);
        }
        auto add_ratio = [](std::vector<double>& to, double a, double b) {
          if (a > 0 && b > 0) to.push_back(a / b);
        };
        for (std::size_t k = 0; k < servers.size(); ++k) {
          if (k == 1) continue;
          add_ratio(ratios[k], this_repeat[k].value, this_repeat[1].value);
          add_ratio(cpu_ratios[k], this_repeat[k].cpu_us, this_repeat[1].cpu_us);
        }
        if (servers.size() > 2) {
          add_ratio(b_ratios, this_repeat[2].value, this_repeat[0].value);
          add_ratio(b_cpu_ratios, this_repeat[2].cpu_us, this_repeat[0].cpu_us);
        }
      }
      auto print_ratios = [](const char* lead, const std::vector<double>& v) {
        if (v.empty()) return;
        const summary r = summarize(v);
        std::printf("%s%.2f (%.2f..%.2f)", lead, r.median, r.min, r.max);
      };
      for (std::size_t k = 0; k < servers.size(); ++k) {
        const summary rate = summarize(values[k]);
        char p99_text[32] = "-";
        if (!p99[k].empty()) {
          std::snprintf(p99_text, sizeof p99_text, "%.2f", summarize(p99[k]).median);
        }
        std::printf("%-10s %5llu %-8s %10.0f %10.0f %10.0f %8.1f %8s", load.c_str(),
                    static_cast<unsigned long long>(connections), servers[k].name.c_str(), rate.min,
                    rate.median, rate.max, summarize(cpu[k]).median, p99_text);
        print_ratios("   ", ratios[k]);
        print_ratios(", ", cpu_ratios[k]);
        if (k == 2) {
          print_ratios("; over spoold: ", b_ratios);
          print_ratios(", ", b_cpu_ratios);
        }
        if (k == 0 && !notes.empty()) std::printf(" |%s", notes.c_str());
        std::printf("\n");
      }
      std::fflush(stdout);
    }
  if (failed_points > 0) {
    std::fprintf(stderr, "spool-load-bench http --tls: %d measurement(s) failed (see the notes)\n",
                 failed_points);
  }
}

}  // namespace bench
