// spool/error.hpp: the error codes every spool API reports, as std::error_code values.
#pragma once

#include <string>
#include <system_error>

namespace spool {

// The values match the C API's SPOOL_E* codes (spool.h), so one table serves both.
enum class errc {
  full = 1,              // the bounded queue is full and the policy is `reject`
  timed_out = 2,         // the queue stayed full for the whole `block_timeout`
  shut_down = 3,         // the pool no longer accepts this submission
  invalid_argument = 4,  // a null function, an empty future, a bad config value
  would_deadlock = 5,    // a blocking call made from one of the pool's own workers
  cancelled = 6,         // the task was dropped before it ran (discard shutdown, discard_oldest)
  no_memory = 7,         // allocation failed
  system = 8,            // the OS refused a resource (thread creation)
};

const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// Thrown by the C++ API. code() compares equal to a spool::errc.
class error : public std::system_error {
 public:
  explicit error(errc e) : std::system_error(make_error_code(e)) {}
  error(errc e, const std::string& what) : std::system_error(make_error_code(e), what) {}
};

// What future::get() throws for a task that was dropped without running.
class task_cancelled : public error {
 public:
  task_cancelled() : error(errc::cancelled) {}
};

}  // namespace spool

template <>
struct std::is_error_code_enum<spool::errc> : std::true_type {};
