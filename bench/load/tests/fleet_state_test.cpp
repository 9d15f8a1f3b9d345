// read_fleet_state (servers/fleet_state.hpp) on state.json files written here: what
// `fleet.py up` writes, and each way a file can be missing, malformed or short of a field, which
// must throw std::runtime_error naming the file and what is wrong (never a default port or an
// empty address).
#include <cstdio>
#include <stdexcept>
#include <string>

#include "servers/fleet_state.hpp"
#include "servers/temp_dir.hpp"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// The message read_fleet_state throws for `text`, or "" if it returned.
std::string error_for(const bench::temp_dir& dir, const std::string& text) {
  const std::string path = dir.file("state.json");
  bench::write_file(path, text);
  try {
    bench::read_fleet_state(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const char* const endpoint_web1 =
    R"({"name": "web1", "addr": "127.0.0.11", "port": 8080, "ns": ""})";

std::string state_with(const std::string& haproxy, const std::string& nodes) {
  return R"({"layout": {"haproxy": )" + haproxy + R"(, "stats": {"name": "stats"}, "nodes": )" +
         nodes + R"(, "redis": [], "sentinels": [], "client_ns": ""},
 "spoold": "/bin/spoold", "site": "/s\u0069te", "settings": {"quorum": 2, "x": [1.5e3, true, null]}})";
}

}  // namespace

int main() {
  const bench::temp_dir dir("spool-load-bench-fleet-state-test");
  const std::string path = dir.file("state.json");

  // What fleet.py writes (json.dump, indent=2), two nodes.
  bench::write_file(path,
                    state_with(R"({"name": "haproxy", "addr": "127.0.0.1", "port": 41000})",
                               std::string("[") + endpoint_web1 +
                                   R"(, {"name": "web2", "addr": "127.0.0.12", "port": 65535}])"));
  try {
    const bench::fleet_state s = bench::read_fleet_state(path);
    check(s.haproxy.text() == "127.0.0.1:41000", "haproxy's address and port");
    check(s.nodes.size() == 2 && s.nodes[0].name == "web1" &&
              s.nodes[0].text() == "127.0.0.11:8080" && s.nodes[1].text() == "127.0.0.12:65535",
          "every node, in order");
  } catch (const std::exception& e) {
    check(false, std::string("a valid state.json: ") + e.what());
  }

  const std::string haproxy = R"({"name": "haproxy", "addr": "127.0.0.1", "port": 41000})";
  const std::string nodes = std::string("[") + endpoint_web1 + "]";

  std::string e = error_for(dir, "");
  check(has(e, "cannot read") && has(e, path), "an empty file: cannot read, with its path");
  try {
    bench::read_fleet_state(dir.file("absent.json"));
    check(false, "a missing file throws");
  } catch (const std::runtime_error& err) {
    check(has(err.what(), "absent.json"), "a missing file: its path in the message");
  }
  e = error_for(dir, state_with(haproxy, nodes).substr(0, 60));
  check(has(e, path) && has(e, "at byte"), "a truncated file: where it stops");
  e = error_for(dir, state_with(haproxy, nodes) + " x");
  check(has(e, "text after the value"), "text after the document");
  e = error_for(dir, R"({"spoold": "/bin/spoold"})");
  check(has(e, "state.layout is missing"), "no layout");
  e = error_for(dir, state_with(R"({"name": "haproxy", "addr": "127.0.0.1"})", nodes));
  check(has(e, "layout.haproxy.port is missing"), "haproxy without a port");
  e = error_for(dir,
                state_with(R"({"name": "haproxy", "addr": "127.0.0.1", "port": "80"})", nodes));
  check(has(e, "layout.haproxy.port is missing or of the wrong type"), "a port that is a string");
  e = error_for(dir, state_with(R"({"name": "haproxy", "addr": "127.0.0.1", "port": 0})", nodes));
  check(has(e, "layout.haproxy.port is not a port: 0"), "port 0");
  e = error_for(dir,
                state_with(R"({"name": "haproxy", "addr": "127.0.0.1", "port": 65536})", nodes));
  check(has(e, "not a port: 65536"), "port 65536");
  e = error_for(dir,
                state_with(R"({"name": "haproxy", "addr": "127.0.0.1", "port": 80.5})", nodes));
  check(has(e, "not a port: 80.5"), "a fractional port");
  e = error_for(dir, state_with(haproxy, R"([{"name": "web1", "port": 8080}])"));
  check(has(e, "layout.nodes[0].addr is missing"), "a node without an address");
  e = error_for(dir, state_with(haproxy, R"({"web1": 1})"));
  check(has(e, "layout.nodes is missing or of the wrong type"), "nodes that are not a list");
  e = error_for(dir, state_with(R"({"name": "h\u00e9", "addr": "127.0.0.1", "port": 80})", nodes));
  check(has(e, "beyond ASCII"), "a \\u escape beyond ASCII is refused, not misread");

  std::printf(failures == 0 ? "all checks passed\n" : "%d check(s) failed\n", failures);
  return failures == 0 ? 0 : 1;
}
