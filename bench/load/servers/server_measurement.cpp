#include "servers/server_measurement.hpp"

#include <cstdio>

#include "progress.hpp"
#include "servers/http_probe.hpp"

namespace bench {

namespace {

// "WHO VARIANT on SERVER: STAGE failed; details:" and the whole of `e`'s message (up to 4000
// characters), on stderr.
void report_stage(const char* who, const std::string& variant, const std::string& server,
                  const std::string& stage, const std::exception& e) {
  progress("%s %s on %s: %s failed; details:", who, variant.c_str(), server.c_str(), stage.c_str());
  std::fprintf(stderr, "%.4000s\n", e.what());
}

}  // namespace

point_failure stage_failure(const char* who, const std::string& variant, const std::string& server,
                            const std::string& stage, const std::exception& e,
                            const std::string& reason) {
  report_stage(who, variant, server, stage, e);
  return point_failure(stage + ": " + (reason.empty() ? first_line(e.what()) : reason));
}

std::unique_ptr<running_server> start_probed(const char* who, const std::string& variant,
                                             const server_kind& kind, const std::string& url_path,
                                             const expected_answer& expected) {
  // Neither stage throws a load generator's error: the reason is the message's first line.
  std::unique_ptr<running_server> server;  // killed (its whole group) if we leave early
  try {
    server = kind.start();
  } catch (const std::exception& e) {
    throw stage_failure(who, variant, kind.name, "start", e);
  }
  try {
    if (expected.page) {
      expect_page_served(server->port(), url_path, expected.text);
    } else {
      expect_file_served(server->port(), url_path, expected.text);
    }
  } catch (const std::exception& e) {
    throw stage_failure(who, variant, kind.name, "probe GET", e);
  }
  return server;
}

void stop_with_remark(running_server& server, const char* who, const std::string& variant,
                      const std::string& server_name, unsigned threads, failure_log& log) {
  try {
    server.stop();
  } catch (const std::exception& e) {
    report_stage(who, variant, server_name, "stop", e);
    log.remark(variant, server_name, threads, "stop: " + first_line(e.what()));
  }
}

std::vector<contender> server_contenders(const char* who, const std::string& variant,
                                         const std::vector<server_kind>& servers, unsigned threads,
                                         failure_log& log,
                                         std::function<sample(const server_kind&)> measure) {
  std::vector<contender> cs;
  for (const server_kind& k : servers) {
    cs.push_back({variant, k.name, {}, [who, variant, &k, threads, &log, measure] {
                    try {
                      return measure(k);
                    } catch (const std::exception& e) {
                      progress("%s %s on %s: failed: %s", who, variant.c_str(), k.name.c_str(),
                               first_line(e.what(), 300).c_str());
                      log.fail(variant, k.name, threads, first_line(e.what(), 300));
                      return failure_log::failed_sample();
                    }
                  }});
    // A measurement records its failures and remarks in `log`, which a child process's copy
    // would lose; and a child would isolate nothing: the servers and the load generator are
    // processes of their own, and no peer's runtime runs in spool-load-bench here.
    cs.back().in_process = true;
  }
  return cs;
}

std::vector<row> measure_servers(const char* who, const std::string& variant, unsigned threads,
                                 const metric& m, const std::vector<server_kind>& servers,
                                 int repeats, failure_log& log,
                                 std::function<sample(const server_kind&)> measure,
                                 const std::function<void(std::vector<row>&)>& with_failed) {
  std::vector<row> rows = measure_point(
      who, variant, threads, m,
      server_contenders(who, variant, servers, threads, log, std::move(measure)), repeats);
  if (with_failed) with_failed(rows);
  log.settle(rows);
  return rows;
}

}  // namespace bench
