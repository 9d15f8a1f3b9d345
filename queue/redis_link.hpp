// One connection to the queue's Redis primary, used by one thread at a time.
//
// Connecting: the target names the primary (asking the Sentinels if there are any); the link
// connects with a timeout, checks with ROLE that the instance is a primary, and loads the
// queue's functions if none are loaded; another build's functions are replaced only with
// connection_options::replace_functions, and refused (errc::other_version) otherwise. Before
// each use it drops a connection made before a failover the target heard of, or one the
// server has closed, so a restarted or replaced Redis costs no failed call. A READONLY answer
// (the primary was demoted under the connection: nothing was written) makes it connect afresh
// and send the same commands once more.
//
// Failures are thrown as error: errc::unavailable when nothing was done (no connection, no
// primary, a replica, a write that sent nothing), errc::outcome_unknown when commands that
// write were sent and their replies did not come (for commands that only read, unavailable).
// The connection is dropped after any failure; the next call connects again. There is no
// backoff here: each caller paces its own retries.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "command.hpp"
#include "redis_target.hpp"
#include "spool/queue/connection.hpp"
#include "spool/queue/error.hpp"
#include "store/redis_handles.hpp"

namespace spool::queue::detail {

using spoold::store::reply_handle;

enum class effect { reads, writes };

class redis_link {
 public:
  redis_link(std::shared_ptr<const redis_target> target, connection_options options);
  redis_link(const redis_link&) = delete;
  redis_link& operator=(const redis_link&) = delete;

  // Sends the commands in one write and returns one reply per command (error replies
  // included, for the caller to read; READONLY is handled here).
  std::vector<reply_handle> round_trip(std::span<const command> commands, effect e);
  reply_handle call(const command& c, effect e);
  // For a command that Redis holds for up to `blocks` (XREAD BLOCK, BLMPOP): waits for its
  // reply up to blocks + command_timeout, and gives up as soon as `wake_fd` is readable,
  // dropping the connection and returning nullptr.
  reply_handle call_blocking(const command& c, std::chrono::milliseconds blocks, int wake_fd);

  void drop() noexcept;
  [[nodiscard]] bool connected() const noexcept { return context_ != nullptr; }
  // "redis://...: 127.0.0.1:6379", for messages.
  [[nodiscard]] std::string where() const;
  [[nodiscard]] const connection_options& options() const noexcept { return options_; }

 private:
  redisContext& connected_context();
  void connect();
  void load_functions(std::string loaded);
  bool load_library(bool replace);
  void send(std::span<const command> commands, effect e);
  reply_handle receive(effect e);
  [[noreturn]] void fail(errc code, const std::string& what);

  std::shared_ptr<const redis_target> target_;
  connection_options options_;
  spoold::store::context_handle context_;
  redis_endpoint at_;
  std::uint64_t moves_seen_ = 0;
};

}  // namespace spool::queue::detail
