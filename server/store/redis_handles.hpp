// Owning handles for hiredis contexts and replies, and the conversions that both the Redis
// store (redis_store.cpp) and the Sentinel client (sentinel.cpp) need.
#pragma once

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spoold::store {

struct context_deleter {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
using context_handle = std::unique_ptr<redisContext, context_deleter>;

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_handle = std::unique_ptr<redisReply, reply_deleter>;

inline timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// The bytes of a string, status or error reply ("" for other types).
inline std::string reply_text(const redisReply& r) {
  return std::string(r.str != nullptr ? r.str : "", r.str != nullptr ? r.len : 0);
}

// An error reply's text, or what else came instead of the expected type.
inline std::string describe_reply(const redisReply& r) {
  if (r.type == REDIS_REPLY_ERROR) return reply_text(r);
  return "unexpected reply of type " + std::to_string(r.type);
}

// Connects with a connect timeout and sets the timeout of each command round trip on the new
// connection. On failure returns nullptr with `error` set.
inline context_handle connect_with_timeouts(const std::string& host, int port,
                                            std::chrono::milliseconds connect_timeout,
                                            std::chrono::milliseconds command_timeout,
                                            std::string& error) {
  context_handle c(redisConnectWithTimeout(host.c_str(), port, to_timeval(connect_timeout)));
  if (!c) {
    error = "connect: out of memory";
    return nullptr;
  }
  if (c->err != 0) {
    error = "connect: " + std::string(c->errstr);
    return nullptr;
  }
  if (redisSetTimeout(c.get(), to_timeval(command_timeout)) != REDIS_OK) {
    error = "setting the command timeout: " + std::string(c->errstr);
    return nullptr;
  }
  return c;
}

// Queues one command (binary-safe arguments) in the context's output buffer; it is sent with
// the next redisGetReply. False when it cannot be queued (out of memory).
inline bool append_command(redisContext& c, std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  return redisAppendCommandArgv(&c, static_cast<int>(argv.size()), argv.data(), lengths.data()) ==
         REDIS_OK;
}

// The next reply, sending what is queued first; nullptr (the context's errstr says why) when
// the connection failed or timed out. The context is unusable after that.
inline reply_handle next_reply(redisContext& c) {
  void* raw = nullptr;
  if (redisGetReply(&c, &raw) != REDIS_OK) return nullptr;
  return reply_handle(static_cast<redisReply*>(raw));
}

}  // namespace spoold::store
