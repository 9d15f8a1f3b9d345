// api/error.cpp: spool::errc as a std::error_category, and its messages.
#include "spool/error.hpp"

#include "spool/spool.h"

namespace spool {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "spool"; }
  std::string message(int code) const override { return spool_strerror(code); }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace spool

extern "C" const char* spool_strerror(int code) {
  switch (code) {
    case SPOOL_OK:
      return "success";
    case SPOOL_EFULL:
      return "the pool's queue is full";
    case SPOOL_ETIMEDOUT:
      return "timed out waiting for room in the pool's queue";
    case SPOOL_ESHUTDOWN:
      return "the pool is shut down and accepts no more tasks";
    case SPOOL_EINVAL:
      return "invalid argument";
    case SPOOL_EDEADLK:
      return "called from one of the pool's own workers, this would deadlock";
    case SPOOL_ECANCELED:
      return "the task was cancelled before it ran";
    case SPOOL_ENOMEM:
      return "out of memory";
    case SPOOL_ESYSTEM:
      return "the system refused a resource (could not start a thread)";
    default:
      return "unknown spool error";
  }
}
