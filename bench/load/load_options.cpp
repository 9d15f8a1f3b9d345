#include "load_options.hpp"

#include <cstdio>
#include <filesystem>
#include <functional>

namespace bench {

namespace {

void apply_param(load_options& o, std::string_view flag, const std::string& value) {
  if (flag == "--duration") {
    o.duration_s = parse_number(o, flag, value);
  } else if (flag == "--concurrency") {
    o.concurrency.clear();
    for (const std::string& part : split(value)) {
      o.concurrency.push_back(parse_count(o, flag, part));
      if (o.concurrency.back() < 1 || o.concurrency.back() > 1'000'000)
        usage_error(o, "--concurrency wants counts in 1..1000000");
    }
  } else if (flag == "--connection") {
    o.connection_modes = split(value);
    for (const std::string& m : o.connection_modes)
      if (m != "keepalive" && m != "close")
        usage_error(o, "--connection wants keepalive and/or close, not '" + m + "'");
  } else if (flag == "--balancers") {
    o.balancers = split(value);
    for (const std::string& name : o.balancers)
      if (name != "haproxy" && name != "nginx")
        usage_error(o, "--balancers wants haproxy and/or nginx, not '" + name + "'");
  } else if (flag == "--servers") {
    o.servers = split(value);
    for (const std::string& name : o.servers)
      if (name != "spoold" && name != "nginx")
        usage_error(o, "--servers wants spoold and/or nginx, not '" + name + "'");
  } else if (flag == "--models") {
    o.spoold_models = split(value);
    for (const std::string& m : o.spoold_models)
      if (m.empty()) usage_error(o, "--models wants spoold model names, e.g. epoll");
  } else if (flag == "--spoold" || flag == "--root" || flag == "--spoold-b") {
    if (value.empty()) usage_error(o, std::string(flag) + " needs a path");
    // Absolute: the servers start in directories of their own.
    (flag == "--spoold" ? o.spoold_path
     : flag == "--root" ? o.site_root
                        : o.spoold_b_path) = std::filesystem::absolute(value).string();
  } else if (flag == "--reps") {
    o.reps = parse_count(o, flag, value);
    if (*o.reps < 1 || *o.reps > 1'000'000) usage_error(o, "--reps wants a count in 1..1000000");
  } else if (flag == "--forms") {
    o.siege_forms = split(value);
    for (const std::string& f : o.siege_forms)
      if (f != "reps" && f != "time")
        usage_error(o, "--forms wants reps and/or time, not '" + f + "'");
  } else if (flag == "--original") {
    if (value != "iterative" && value != "threaded")
      usage_error(o, "--original wants iterative or threaded, not '" + value + "'");
    o.original_model = value;
  } else if (flag == "--nodes") {
    o.fleet_nodes.clear();
    for (const std::string& part : split(value)) {
      o.fleet_nodes.push_back(parse_count(o, flag, part));
      if (o.fleet_nodes.back() < 1 || o.fleet_nodes.back() > 9)
        usage_error(o, "--nodes wants counts in 1..9");
    }
  } else if (flag == "--failovers") {
    o.failovers = parse_count(o, flag, value);
    if (*o.failovers > 100) usage_error(o, "--failovers wants a count in 0..100");
  } else if (flag == "--store") {
    if (value.empty()) usage_error(o, "--store wants redis or a spoold --store spec");
    o.store_spec = value;
  } else if (flag == "--file") {
    if (value.empty() || value.front() != '/')
      usage_error(o, "--file wants a URL path starting with '/', not '" + value + "'");
    o.url_path = value;
  }
}

}  // namespace

void print_load_options_help(std::FILE* out) {
  print_run_options_help(out, "wrk's threads (-t), where an experiment runs wrk (default 2)",
                         "smaller sizes and shorter runs (each experiment's help says which)",
                         false);
}

load_options parse_load_options(int argc, char** argv, const experiment* exp) {
  load_options o;
  parse_run_options(
      argc, argv, o, true,
      [&](const std::string& flag, const std::function<std::string()>& value) {
        if (!exp->takes(flag)) return false;
        if (flag == "--tls") {
          o.tls = true;
        } else {
          apply_param(o, flag, value());
        }
        return true;
      },
      [&] {
        print_experiment_help(*exp);
        print_load_options_help(stdout);
      });
  return o;
}

}  // namespace bench
