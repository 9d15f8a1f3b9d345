// The worker's built-in tasks, for trying the queue out and for tests:
//   echo     the payload back
//   sleep    waits the payload's milliseconds (ending early, failed, if its token fires)
//   fail     fails with the payload as its error ("failed as asked" if empty)
//   sha256   the payload's SHA-256, in hex
//   record   appends "PAYLOAD ATTEMPT\n" to the record file in one write(2) with O_APPEND
//            (lines of several workers on one file do not mix); a payload starting with
//            "fail-first " fails its attempt number 1 instead, writing nothing
#pragma once

#include <string>

#include "spool/queue.hpp"

namespace spool_queue_cli {

// Registers the five on the worker. record_path "" leaves record failing each attempt with
// "no --record-file". Throws std::system_error if the record file cannot be opened.
void register_builtin_handlers(spool::queue::worker& w, const std::string& record_path);

}  // namespace spool_queue_cli
