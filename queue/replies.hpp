// Reading the replies of the queue's functions: their shapes, and their error replies turned
// into error values (NOJOB -> not_found, WRONGSTATE -> wrong_state, BADARG -> invalid_argument,
// anything else -> redis_error with Redis's words).
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace spool::queue::detail {

// Throws the error that an error reply stands for; `what` says which call answered it.
[[noreturn]] void throw_error_reply(const redisReply& r, std::string_view what);
// Throws (as above) if r is an error reply.
void check_not_error(const redisReply& r, std::string_view what);

// r as an array of at least `min` elements, else error(redis_error) naming `what`.
const redisReply& array_of(const redisReply& r, std::size_t min, std::string_view what);
// The bytes of a string or status reply; "" for nil. error(redis_error) for other types.
std::string text_of(const redisReply& r, std::string_view what);
// An integer reply, or a string holding a decimal integer.
std::int64_t integer_of(const redisReply& r, std::string_view what);

}  // namespace spool::queue::detail
