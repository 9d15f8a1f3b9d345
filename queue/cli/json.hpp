// JSON text for the command line's answers. Strings are bytes: valid UTF-8 passes through
// (control characters escaped), and each byte that is not part of valid UTF-8 is written as
// \u00XX, so that any result prints as valid JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "spool/queue.hpp"

namespace spool_queue_cli {

std::string json_string(std::string_view bytes);
std::string to_json(const spool::queue::job_status& s);
std::string to_json(const spool::queue::queue_stats& s);

}  // namespace spool_queue_cli
