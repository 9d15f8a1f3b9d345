#include "servers/nginx.hpp"

#include <signal.h>

#include <chrono>
#include <stdexcept>

#include "process_stats.hpp"

namespace bench {

std::string nginx_config(const nginx_settings& s, const std::string& dir, std::uint16_t port) {
  // nginx's defaults except: what running unprivileged from `dir` needs (pid, logs, temp
  // paths), no access log (spoold logs nothing by default either), sendfile and tcp_nopush as
  // any static-file deployment has them, and keepalive_requests raised from 1000 so that a
  // keep-alive run measures requests, not reconnections. As a balancer: an upstream of the
  // servers with kept-alive connections to them (keepalive 128, HTTP/1.1 without a Connection
  // header), idle ones closed by nginx after 10 s, before a server's own idle timeout (15 s
  // for spoold), and nginx's default retries (an error before a response header sends an
  // idempotent request to the next server).
  const std::string d = dir + "/";
  std::string c;
  c += "daemon off;\n";
  c += "master_process on;\n";
  c += "worker_processes " + std::to_string(s.workers) + ";\n";
  c += "pid " + d + "nginx.pid;\n";
  c += "error_log " + d + "error.log warn;\n";
  c += "events {\n";
  c += "  worker_connections " + std::to_string(s.worker_connections) + ";\n";
  c += "  use epoll;\n";
  c += "}\n";
  c += "http {\n";
  c += "  types {\n";
  c += "    text/html html htm;\n";
  c += "    text/css css;\n";
  c += "    application/javascript js;\n";
  c += "    application/json json;\n";
  c += "    image/png png;\n";
  c += "    image/svg+xml svg;\n";
  c += "    image/x-icon ico;\n";
  c += "  }\n";
  c += "  default_type application/octet-stream;\n";
  c += "  access_log off;\n";
  c += "  sendfile on;\n";
  c += "  tcp_nopush on;\n";
  c += "  keepalive_timeout 65;\n";
  c += "  keepalive_requests 100000;\n";
  for (const char* temp : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"})
    c += "  " + std::string(temp) + "_temp_path " + d + temp + "_temp;\n";
  if (!s.upstreams.empty()) {
    c += "  upstream servers {\n";
    for (const std::string& u : s.upstreams) c += "    server " + u + ";\n";
    c += "    keepalive 128;\n";
    c += "    keepalive_requests 100000;\n";
    c += "    keepalive_timeout 10s;\n";
    c += "  }\n";
  }
  c += "  server {\n";
  c += "    listen 127.0.0.1:" + std::to_string(port) + (s.tls_cert.empty() ? "" : " ssl") +
       " backlog=65535;\n";
  if (!s.tls_cert.empty()) {
    // spoold's TLS settings (server/conn/tls.cpp): 1.2 and 1.3, ECDHE + AEAD for 1.2 in the
    // same order, the server's order, tickets and a session cache (shared by the workers, as
    // spoold's loops share one).
    c += "    ssl_certificate " + s.tls_cert + ";\n";
    c += "    ssl_certificate_key " + s.tls_key + ";\n";
    c += "    ssl_protocols TLSv1.2 TLSv1.3;\n";
    c += "    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
         "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
         "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305;\n";
    c += "    ssl_prefer_server_ciphers on;\n";
    c += "    ssl_session_cache shared:SSL:10m;\n";
    c += "    ssl_session_tickets on;\n";
  }
  if (s.upstreams.empty()) {
    c += "    root " + s.root + ";\n";
  } else {
    c += "    location / {\n";
    c += "      proxy_pass http://servers;\n";
    c += "      proxy_http_version 1.1;\n";
    c += "      proxy_set_header Connection \"\";\n";
    c += "    }\n";
  }
  c += "  }\n";
  c += "}\n";
  return c;
}

std::unique_ptr<running_server> start_nginx(const nginx_settings& s) {
  auto dir = std::make_unique<temp_dir>("spool-load-bench-nginx");
  const std::uint16_t port = free_port();
  const std::string conf = dir->file("nginx.conf");
  write_file(conf, nginx_config(s, dir->path(), port));
  // -e: the error log before the configuration is read (its default is under /var/log).
  auto process = std::make_unique<child_process>(child_process::launch{
      {s.binary, "-p", dir->path() + "/", "-c", conf, "-e", dir->file("error.log")},
      dir->path(),
      false,
      false,
      dir->file("stderr.log")});
  wait_until_listening(*process, port, "nginx", dir->file("error.log"), std::chrono::seconds(10));
  const std::string log = dir->file("error.log");
  return std::make_unique<running_server>(
      "nginx", std::move(dir), std::move(process), log, port,
      running_server::stop_rule{SIGQUIT, std::chrono::seconds(15)});
}

server_kind nginx_kind(const std::string& binary, const std::string& root) {
  nginx_settings s;
  s.binary = binary;
  s.root = root;
  s.workers = online_cpus();  // as many as spoold's event loops (its --loops default)
  return {"nginx", [s] { return start_nginx(s); }};
}

}  // namespace bench
