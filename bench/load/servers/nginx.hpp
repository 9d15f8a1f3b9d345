// nginx.hpp: nginx as the reference server, run as the current user from a configuration
// written into a directory of its own (nothing needs root or /var).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "servers/running_server.hpp"

namespace bench {

// Where the experiments expect nginx (the distribution's package, scripts/install-deps.sh).
inline constexpr const char* nginx_binary = "/usr/sbin/nginx";

struct nginx_settings {
  std::string binary = nginx_binary;
  std::string root;  // the static files
  // "host:port" of each upstream server: when any, nginx is a balancer in front of them
  // (an upstream with kept-alive connections) and serves nothing itself.
  std::vector<std::string> upstreams;
  unsigned workers = 2;  // worker_processes
  unsigned worker_connections = 20000;
  // TLS (http --tls): the certificate and key (PEM); "" serves plain HTTP.
  std::string tls_cert;
  std::string tls_key;
};

// The whole nginx.conf: `dir` for the pid file, logs and temporary files.
std::string nginx_config(const nginx_settings& s, const std::string& dir, std::uint16_t port);

// Starts a master with its workers in the foreground (daemon off) on a free port and waits
// until it accepts connections. Stopped with SIGQUIT (graceful: finish requests, then exit).
std::unique_ptr<running_server> start_nginx(const nginx_settings& s);

// nginx as one server of a comparison ("nginx"), with one worker per online CPU, serving `root`.
server_kind nginx_kind(const std::string& binary, const std::string& root);

}  // namespace bench
