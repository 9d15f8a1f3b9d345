#include "redis_link.hpp"

#include <poll.h>
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include "functions.hpp"
#include "names.hpp"
#include "replies.hpp"
#include "spool/queue/error.hpp"

namespace spool::queue::detail {
namespace {

using spoold::store::reply_text;

// hiredis writes with write(2): a connection the server has closed would raise SIGPIPE, which
// kills a process that has not ignored it. While a write runs, the calling thread blocks
// SIGPIPE; one raised meanwhile is taken off the thread before the old mask comes back.
class sigpipe_guard {
 public:
  sigpipe_guard() noexcept {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~sigpipe_guard() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

// Whether the server has closed the connection (its FIN or RST has arrived).
bool closed_by_server(const redisContext& c) {
  pollfd p{c.fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool is_readonly(const redisReply& r) {
  if (r.type != REDIS_REPLY_ERROR) return false;
  const std::string text = reply_text(r);
  return text.starts_with("READONLY") || text.find("read only replica") != std::string::npos ||
         text.find("readonly replica") != std::string::npos;
}

std::string hiredis_error(const redisContext& c) {
  if (c.err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) return "timed out";
  return c.errstr[0] != '\0' ? std::string(c.errstr) : "connection lost";
}

}  // namespace

redis_link::redis_link(std::shared_ptr<const redis_target> target, connection_options options)
    : target_(std::move(target)), options_(options) {}

std::string redis_link::where() const {
  return context_ ? target_->name() + " (" + at_.text() + ")" : target_->name();
}

void redis_link::drop() noexcept { context_.reset(); }

void redis_link::fail(errc code, const std::string& what) {
  const std::string place = where();
  drop();
  throw error(code, place + ": " + what);
}

redisContext& redis_link::connected_context() {
  if (context_ && (target_->moves() != moves_seen_ || closed_by_server(*context_))) drop();
  if (!context_) connect();
  return *context_;
}

void redis_link::connect() {
  moves_seen_ = target_->moves();
  at_ = target_->primary();  // throws unavailable
  std::string why;
  context_ = spoold::store::connect_with_timeouts(at_.host, at_.port, options_.connect_timeout,
                                                  options_.command_timeout, why);
  if (!context_) throw error(errc::unavailable, target_->name() + " (" + at_.text() + "): " + why);
  const functions_library& lib = functions();
  const command check[] = {command{"ROLE"}, command{"FCALL_RO", "spool_version", "0"}};
  send(check, effect::reads);
  const reply_handle role = receive(effect::reads);
  const reply_handle version = receive(effect::reads);
  if (role->type != REDIS_REPLY_ARRAY || role->elements == 0 ||
      role->element[0]->type != REDIS_REPLY_STRING) {
    fail(errc::unavailable, "ROLE: " + spoold::store::describe_reply(*role));
  }
  const std::string r = reply_text(*role->element[0]);
  if (r != "master") {
    fail(errc::unavailable,
         "is a read-only replica (ROLE says " + r + ")" +
             (target_->via_sentinels() ? "; the Sentinels have not caught up yet"
                                       : "; give the primary's address, or the Sentinels'"));
  }
  if (version->type == REDIS_REPLY_STRING && reply_text(*version) == lib.version) return;
  load_functions(version->type == REDIS_REPLY_STRING ? reply_text(*version) : std::string());
}

// `loaded`: the version that spool_version answered, "" if it answered an error (no library,
// or one without that function). A library of another build is replaced only when the options
// say so: its processes would go on calling functions that are not theirs, with arguments and
// keys that may no longer mean the same. Without REPLACE, FUNCTION LOAD refuses a library that
// exists, so two connections that both found none cannot replace each other's.
void redis_link::load_functions(std::string loaded) {
  const functions_library& lib = functions();
  if (loaded.empty() && !options_.replace_functions) {
    if (load_library(false)) return;
    // A library of that name appeared since spool_version was asked (another connection
    // loaded it), or it has no spool_version: ask again which it is.
    const command ask{"FCALL_RO", "spool_version", "0"};
    send({&ask, 1}, effect::reads);
    const reply_handle again = receive(effect::reads);
    if (again->type == REDIS_REPLY_STRING && reply_text(*again) == lib.version) return;
    loaded = again->type == REDIS_REPLY_STRING ? reply_text(*again)
                                               : "(unknown: " + reply_text(*again) + ")";
  }
  if (!options_.replace_functions) {
    fail(errc::other_version,
         "Redis holds the queue's functions of another spool build (version " + loaded +
             "; this build's is " + lib.version +
             "). Stop every worker and producer of that build, then load this build's "
             "functions: spool-queue --replace-functions, or "
             "connection_options::replace_functions");
  }
  load_library(true);
}

// FUNCTION LOAD of this build's library, with REPLACE or without. False when Redis answers
// that the library exists (only without REPLACE); any other error is thrown.
bool redis_link::load_library(bool replace) {
  const functions_library& lib = functions();
  const command load = replace ? command{"FUNCTION", "LOAD", "REPLACE", lib.code}
                               : command{"FUNCTION", "LOAD", lib.code};
  send({&load, 1}, effect::writes);
  const reply_handle answer = receive(effect::writes);
  if (answer->type != REDIS_REPLY_ERROR) return true;
  const std::string text = reply_text(*answer);
  if (!replace && text.find("already exists") != std::string::npos) return false;
  fail(is_readonly(*answer) ? errc::unavailable : errc::redis_error,
       "FUNCTION LOAD (the queue's functions): " + text);
}

void redis_link::send(std::span<const command> commands, effect e) {
  redisContext& c = *context_;
  for (const command& cmd : commands) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    argv.reserve(cmd.args().size());
    lengths.reserve(cmd.args().size());
    for (const std::string& a : cmd.args()) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    if (redisAppendCommandArgv(&c, static_cast<int>(argv.size()), argv.data(), lengths.data()) !=
        REDIS_OK) {
      fail(errc::unavailable, "queueing " + cmd.name() + ": out of memory");
    }
  }
  // A write that fails sends nothing, so a failure on the first one means the server got none
  // of it; after a partial write it may have got whole commands.
  sigpipe_guard guard;
  int done = 0;
  for (bool first = true; done == 0; first = false) {
    if (redisBufferWrite(&c, &done) != REDIS_OK) {
      fail(first || e == effect::reads ? errc::unavailable : errc::outcome_unknown,
           "sending: " + hiredis_error(c));
    }
  }
}

reply_handle redis_link::receive(effect e) {
  reply_handle r = spoold::store::next_reply(*context_);
  if (!r) {
    fail(e == effect::writes ? errc::outcome_unknown : errc::unavailable,
         "no reply: " + hiredis_error(*context_));
  }
  return r;
}

std::vector<reply_handle> redis_link::round_trip(std::span<const command> commands, effect e) {
  for (int attempt = 0;; ++attempt) {
    connected_context();
    send(commands, e);
    std::vector<reply_handle> replies;
    replies.reserve(commands.size());
    bool demoted = false;
    for (std::size_t i = 0; i < commands.size(); ++i) {
      replies.push_back(receive(e));
      demoted = demoted || is_readonly(*replies.back());
    }
    if (!demoted) return replies;
    // A replica refuses every write, so none of these commands wrote anything: connect to the
    // primary (the Sentinels know it by now, or soon) and send them again, once.
    const std::string text = reply_text(*replies.front());
    drop();
    if (attempt > 0) {
      throw error(errc::unavailable, target_->name() + ": still a read-only replica: " + text);
    }
  }
}

reply_handle redis_link::call(const command& c, effect e) {
  return std::move(round_trip({&c, 1}, e).front());
}

reply_handle redis_link::call_blocking(const command& c, std::chrono::milliseconds blocks,
                                       int wake_fd) {
  redisContext& ctx = connected_context();
  send({&c, 1}, effect::reads);
  const auto deadline = std::chrono::steady_clock::now() + blocks + options_.command_timeout;
  while (true) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(&ctx, &raw) != REDIS_OK) {
      fail(errc::unavailable, "reading a reply: " + hiredis_error(ctx));
    }
    if (raw != nullptr) {
      reply_handle r(static_cast<redisReply*>(raw));
      if (is_readonly(*r)) fail(errc::unavailable, reply_text(*r));
      return r;
    }
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) fail(errc::unavailable, c.name() + ": no reply: timed out");
    pollfd fds[2] = {{ctx.fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    const int n = ::poll(fds, wake_fd >= 0 ? 2 : 1, static_cast<int>(left.count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errc::unavailable, "poll: " + std::string(std::strerror(errno)));
    }
    if (wake_fd >= 0 && fds[1].revents != 0) {
      drop();  // the reply would come later, on a connection nobody reads: start afresh
      return nullptr;
    }
    if (fds[0].revents != 0 && redisBufferRead(&ctx) != REDIS_OK) {
      fail(errc::unavailable, "reading a reply: " + hiredis_error(ctx));
    }
  }
}

std::string command::name() const {
  std::string out;
  for (std::size_t i = 0; i < args_.size() && i < 2; ++i) {
    if (!out.empty()) out += ' ';
    out += args_[i];
  }
  return out;
}

command fcall(std::string_view function, std::string_view queue) {
  command c{"FCALL", function, "1"};
  c.add(queue_prefix(queue));
  c.add(queue);
  return c;
}

}  // namespace spool::queue::detail
