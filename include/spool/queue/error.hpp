// spool/queue/error.hpp: what the queue's calls report when they cannot do what was asked.
#pragma once

#include <string>
#include <system_error>

#include "spool/error.hpp"

namespace spool::queue {

// The values match the C API's SPOOL_QUEUE_E* codes (spool/queue.h).
enum class errc {
  unavailable = 1,       // Redis could not be reached, knows no primary, is read-only or refused
                         // the write: nothing was done; trying again later is safe
  outcome_unknown = 2,   // the command reached Redis and its reply was lost: it may or may not
                         // have been done (repeating a submission with the same key is safe)
  full = 3,              // the queue is at its maximum length and the policy is reject
  timed_out = 4,         // no room came within the block timeout, or a wait ran out
  invalid_argument = 5,  // a malformed URL, queue, task or job id, or an option out of range
  not_found = 6,         // no such job: never submitted, or its result has expired
  too_large = 7,         // a payload or a result above the configured limit
  wrong_state = 8,       // the job is not in a state that allows it (requeue of a job that is
                         // not dead, cancel of a finished one)
  redis_error = 9,       // Redis answered an error the library does not expect (out of memory,
                         // a command renamed, ...); the message has Redis's words
  shut_down = 10,        // the producer or worker is stopped or stopping
  wrong_order = 11,      // a call the object's state does not allow (handle() after start())
  job_failed = 12,       // (a result's get()) the job ran out of attempts: it is dead
  other_version = 15,    // Redis holds the queue's functions of another spool build, and the
                         // connection may not replace them (connection_options): nothing done
};

const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// Thrown by the queue's C++ API. code() compares equal to a spool::queue::errc.
class error : public std::system_error {
 public:
  error(errc e, const std::string& what) : std::system_error(make_error_code(e), what) {}
  errc value() const noexcept { return static_cast<errc>(code().value()); }
};

// What a result future's get() throws for a job that ended dead: what() is the error of its
// last attempt (the handler's exception message, "time limit of N ms exceeded", ...).
class job_failed : public error {
 public:
  explicit job_failed(const std::string& what) : error(errc::job_failed, what), message_(what) {}
  // The attempt's error exactly (system_error's what() would add the category's words).
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// What a result future's get() throws for a job that was cancelled: a spool::task_cancelled,
// as for a pool task dropped before it ran.
class job_cancelled : public spool::task_cancelled {
 public:
  job_cancelled() = default;
};

}  // namespace spool::queue

template <>
struct std::is_error_code_enum<spool::queue::errc> : std::true_type {};
