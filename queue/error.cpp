#include <string>

#include "spool/queue/error.hpp"

namespace spool::queue {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "spool::queue"; }
  std::string message(int code) const override {
    switch (static_cast<errc>(code)) {
      case errc::unavailable:
        return "Redis unavailable: nothing was done";
      case errc::outcome_unknown:
        return "outcome unknown: the reply was lost";
      case errc::full:
        return "the queue is full";
      case errc::timed_out:
        return "timed out";
      case errc::invalid_argument:
        return "invalid argument";
      case errc::not_found:
        return "no such job";
      case errc::too_large:
        return "too large";
      case errc::wrong_state:
        return "the job is not in a state that allows this";
      case errc::redis_error:
        return "Redis answered an error";
      case errc::shut_down:
        return "shut down";
      case errc::wrong_order:
        return "call out of order";
      case errc::job_failed:
        return "the job failed";
      case errc::other_version:
        return "Redis holds another spool build's queue functions";
    }
    return "unknown spool::queue error " + std::to_string(code);
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const category c;
  return c;
}

}  // namespace spool::queue
