#include "servers/spoold.hpp"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <stdexcept>

#include "servers/failure_log.hpp"

namespace bench {

std::optional<std::uint16_t> listening_port(std::string_view line) {
  // "https://" with --tls-only.
  constexpr std::string_view marker = "listening on http://";
  constexpr std::string_view tls_marker = "listening on https://";
  std::size_t at = line.find(marker);
  std::size_t skip = marker.size();
  if (at == std::string_view::npos) {
    at = line.find(tls_marker);
    skip = tls_marker.size();
  }
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view rest = line.substr(at + skip);
  const auto colon = rest.find(':');
  const auto slash = rest.find('/');
  if (colon == std::string_view::npos || (slash != std::string_view::npos && slash < colon))
    return std::nullopt;
  unsigned port = 0;
  const char* first = rest.data() + colon + 1;
  const char* last = rest.data() + rest.size();
  const auto [end, error] = std::from_chars(first, last, port);
  if (error != std::errc() || end == first || port == 0 || port > 65535) return std::nullopt;
  if (end != last && *end != '/') return std::nullopt;
  return static_cast<std::uint16_t>(port);
}

spoold_variant spoold_variant_of(const std::string& name) {
  if (name == "prethreaded-nolock")
    return {name, "prethreaded", {"--accept-lock", "off"}, "--accept-lock"};
  return {name, name, {}, ""};
}

std::vector<std::string> expand_spoold_models(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  const auto add = [&out](const std::string& n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  for (const std::string& n : names) {
    if (n == "all")
      for (const std::string& m : spoold_model_names()) add(m);
    else
      add(n);
  }
  return out;
}

std::string spoold_help(const std::string& binary) {
  child_process help(child_process::launch{{binary, "--help"}, "", true, true, ""});
  std::string text = help.read_all();
  const exit_status status = help.wait();
  if (!status.ok())
    throw std::runtime_error("`" + binary + " --help` ended with " + status.describe());
  return text;
}

std::unique_ptr<running_server> start_spoold(const spoold_settings& s) {
  auto dir = std::make_unique<temp_dir>("spool-load-bench-spoold");
  const std::string log = dir->file("stderr.log");
  std::vector<std::string> argv{s.binary, "--port", "0", "--root", s.root};
  if (!s.model.empty()) argv.insert(argv.end(), {"--model", s.model});
  argv.insert(argv.end(), s.extra_args.begin(), s.extra_args.end());
  std::string name = s.model.empty() ? "spoold" : "spoold --model " + s.model;
  for (const std::string& a : s.extra_args) name += " " + a;
  // stdout is a pipe for the startup line; with no access log (the default) spoold writes one
  // more line at exit, far below what the pipe holds unread.
  auto process =
      std::make_unique<child_process>(child_process::launch{argv, dir->path(), true, false, log});

  const auto deadline = child_process::clock::now() + std::chrono::seconds(10);
  std::optional<std::uint16_t> port;
  while (!port) {
    const std::optional<std::string> line = process->read_line(deadline);
    if (!line) {
      // End of file before the deadline: spoold is exiting; give it a moment to be reaped.
      const auto now = child_process::clock::now();
      const auto status = process->wait_until(now < deadline ? now + std::chrono::seconds(2) : now);
      const std::string what =
          status ? name + " exited (" + status->describe() + ") without a startup line"
                 : name + " printed no startup line within 10 s";
      // Its first complaint on the first line: that line is what a failed point reports.
      const std::string err = read_file(log);
      throw std::runtime_error(
          err.empty() ? what : what + ": " + first_line(err) + "\nits stderr:\n" + err);
    }
    port = listening_port(*line);
  }
  wait_until_listening(*process, *port, name, log, std::chrono::seconds(10));
  return std::make_unique<running_server>(
      name, std::move(dir), std::move(process), log, *port,
      running_server::stop_rule{SIGTERM, std::chrono::seconds(20)});
}

server_kind spoold_kind(const std::string& binary, const std::string& root,
                        const std::string& variant, const std::vector<std::string>& extra_args) {
  spoold_settings s{binary, root, "", extra_args};
  if (!variant.empty()) {
    const spoold_variant v = spoold_variant_of(variant);
    s.model = v.model;
    s.extra_args = v.extra_args;
    s.extra_args.insert(s.extra_args.end(), extra_args.begin(), extra_args.end());
  }
  return {variant.empty() ? "spoold" : "spoold (" + variant + ")", [s] { return start_spoold(s); }};
}

std::string short_server_name(const std::string& row_name) {
  const std::string prefix = "spoold (";
  if (row_name.rfind(prefix, 0) == 0 && row_name.back() == ')')
    return row_name.substr(prefix.size(), row_name.size() - prefix.size() - 1);
  return row_name;
}

}  // namespace bench
