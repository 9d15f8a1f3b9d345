#include "replies.hpp"

#include <charconv>

#include "spool/queue/error.hpp"
#include "store/redis_handles.hpp"

namespace spool::queue::detail {

using spoold::store::describe_reply;
using spoold::store::reply_text;

void throw_error_reply(const redisReply& r, std::string_view what) {
  const std::string text = reply_text(r);
  const std::string where = std::string(what) + ": ";
  const auto strip = [&](std::string_view word) { return text.substr(word.size() + 1); };
  if (text.starts_with("NOJOB ")) throw error(errc::not_found, strip("NOJOB"));
  if (text.starts_with("WRONGSTATE ")) throw error(errc::wrong_state, strip("WRONGSTATE"));
  if (text.starts_with("BADARG ")) throw error(errc::invalid_argument, where + strip("BADARG"));
  // Redis wraps a function's error reply in its own words for some errors ("ERR ... script").
  if (const std::size_t at = text.find("NOJOB "); at != std::string::npos) {
    throw error(errc::not_found, text.substr(at + 6));
  }
  if (text.starts_with("LOADING") || text.starts_with("MASTERDOWN") ||
      text.starts_with("NOREPLICAS") || text.starts_with("BUSY")) {
    throw error(errc::unavailable, where + text);
  }
  throw error(errc::redis_error, where + (r.type == REDIS_REPLY_ERROR ? text : describe_reply(r)));
}

void check_not_error(const redisReply& r, std::string_view what) {
  if (r.type == REDIS_REPLY_ERROR) throw_error_reply(r, what);
}

const redisReply& array_of(const redisReply& r, std::size_t min, std::string_view what) {
  check_not_error(r, what);
  if (r.type != REDIS_REPLY_ARRAY || r.elements < min) {
    throw error(errc::redis_error, std::string(what) + ": unexpected reply (" + describe_reply(r) +
                                       ", " + std::to_string(r.elements) + " elements)");
  }
  return r;
}

std::string text_of(const redisReply& r, std::string_view what) {
  check_not_error(r, what);
  if (r.type == REDIS_REPLY_NIL) return {};
  if (r.type == REDIS_REPLY_STRING || r.type == REDIS_REPLY_STATUS) return reply_text(r);
  if (r.type == REDIS_REPLY_INTEGER) return std::to_string(r.integer);
  throw error(errc::redis_error, std::string(what) + ": " + describe_reply(r));
}

std::int64_t integer_of(const redisReply& r, std::string_view what) {
  check_not_error(r, what);
  if (r.type == REDIS_REPLY_INTEGER) return r.integer;
  if (r.type == REDIS_REPLY_STRING || r.type == REDIS_REPLY_STATUS) {
    std::int64_t n = 0;
    const char* end = r.str + r.len;
    const auto [at, ec] = std::from_chars(r.str, end, n);
    if (ec == std::errc() && at == end) return n;
  }
  if (r.type == REDIS_REPLY_NIL) return 0;
  throw error(errc::redis_error, std::string(what) + ": not a number (" + describe_reply(r) + ")");
}

}  // namespace spool::queue::detail
