// What spool's two benchmark commands share: the wall clock in ns, the contract's Redis URL
// ("redis://HOST:PORT/0": database 0 only), and argument parsing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace spool_queue_bench {

// CLOCK_REALTIME, ns: the contract's timestamps.
std::int64_t now_ns();

// The store URL spool takes for a contract URL: "/0" dropped (spool uses database 0); any other
// database refused. Exits with a message on a malformed one.
std::string store_url(const std::string& contract_url);

// --name value pairs (and bare --flags, value "") from argv; exits with `usage` on a stray word.
std::map<std::string, std::string> parse_args(int argc, char** argv, const char* usage,
                                              const std::vector<std::string>& flags);
// The value of a required option, or exit with `usage`.
std::string required(const std::map<std::string, std::string>& a, const std::string& name,
                     const char* usage);
[[noreturn]] void fail(const std::string& message);

}  // namespace spool_queue_bench
