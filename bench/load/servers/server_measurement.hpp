// server_measurement.hpp: the steps of a server measurement that every server experiment takes
// alike (start and probe a fresh server, stop it, give up on a stage with a reason), and the
// measurement of one point on every server of a run. `who` names the experiment in progress
// lines, `variant` the point and `server` the row (server_kind::name).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "measure_point.hpp"
#include "servers/failure_log.hpp"
#include "servers/running_server.hpp"
#include "servers/served_content.hpp"

namespace bench {

// A stage of a measurement failed: says so on stderr, with the whole of `e`'s message (up to
// 4000 characters), and returns the point's failure, "STAGE: REASON", where the reason is
// `reason` or else the first line of `e`'s message. The caller throws it.
point_failure stage_failure(const char* who, const std::string& variant, const std::string& server,
                            const std::string& stage, const std::exception& e,
                            const std::string& reason = "");

// A fresh server of `kind`, checked with one GET of `url_path` (status 200 and `expected`).
// Throws point_failure ("start: REASON" or "probe GET: REASON") after stage_failure.
std::unique_ptr<running_server> start_probed(const char* who, const std::string& variant,
                                             const server_kind& kind, const std::string& url_path,
                                             const expected_answer& expected);

// Stops `server` gracefully. A stop that fails leaves the figures standing: its details go to
// stderr and a remark "stop: REASON" to `log` at (variant, server, threads).
void stop_with_remark(running_server& server, const char* who, const std::string& variant,
                      const std::string& server_name, unsigned threads, failure_log& log);

// The contenders of a point for measure_point, one per server of `servers` (which, like `log`,
// must outlive them): each runs `measure` on its server. A measurement that throws
// (point_failure, or anything else that went wrong at this point only, such as a temporary
// directory that could not be made) gives a progress line, the failure in `log` at (variant,
// server, threads) and failure_log::failed_sample(): the run goes on.
std::vector<contender> server_contenders(const char* who, const std::string& variant,
                                         const std::vector<server_kind>& servers, unsigned threads,
                                         failure_log& log,
                                         std::function<sample(const server_kind&)> measure);

// One point of a server experiment: its server_contenders measured `repeats` times
// (measure_point), then `with_failed` on the rows while failed measurements still hold their
// places among the repeats (for ratios taken repeat by repeat), then failure_log::settle.
std::vector<row> measure_servers(const char* who, const std::string& variant, unsigned threads,
                                 const metric& m, const std::vector<server_kind>& servers,
                                 int repeats, failure_log& log,
                                 std::function<sample(const server_kind&)> measure,
                                 const std::function<void(std::vector<row>&)>& with_failed = {});

}  // namespace bench
