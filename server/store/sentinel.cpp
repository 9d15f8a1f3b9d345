#include "store/sentinel.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "store/redis_handles.hpp"

namespace spoold::store {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view switch_channel = "+switch-master";
// How long the watcher waits before trying the next Sentinel after a failure, and how long a
// subscription may be silent before the watcher checks it with PING (and, if that PING is not
// answered within the same time, gives up on that Sentinel).
constexpr milliseconds watch_retry{500};
constexpr milliseconds watch_idle{2000};

bool is_string(const redisReply& r) {
  return r.type == REDIS_REPLY_STRING || r.type == REDIS_REPLY_STATUS;
}

std::optional<int> to_port(std::string_view text) {
  int port = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

// The reply to SENTINEL get-master-addr-by-name: [ip, port], or nil for an unknown master.
std::optional<redis_endpoint> address_from(const redisReply& r) {
  if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 || !is_string(*r.element[0]) ||
      !is_string(*r.element[1])) {
    return std::nullopt;
  }
  const std::optional<int> port = to_port(reply_text(*r.element[1]));
  if (!port) return std::nullopt;
  return redis_endpoint{reply_text(*r.element[0]), *port};
}

// One replica of SENTINEL replicas' answer (a flat list of field, value): its address, if the
// Sentinel sees it up (flags "slave" alone: not s_down, not disconnected).
std::optional<redis_endpoint> replica_up(const redisReply& r) {
  if (r.type != REDIS_REPLY_ARRAY || r.elements % 2 != 0) return std::nullopt;
  std::string_view ip, port, flags;
  for (std::size_t i = 0; i + 1 < r.elements; i += 2) {
    if (!is_string(*r.element[i]) || !is_string(*r.element[i + 1])) return std::nullopt;
    const std::string_view field(r.element[i]->str, r.element[i]->len);
    const std::string_view value(r.element[i + 1]->str, r.element[i + 1]->len);
    if (field == "ip") ip = value;
    if (field == "port") port = value;
    if (field == "flags") flags = value;
  }
  const std::optional<int> p = to_port(port);
  if (flags != "slave" || ip.empty() || !p) return std::nullopt;
  return redis_endpoint{std::string(ip), *p};
}

// "NAME old-ip old-port new-ip new-port": the new address, if the message is about `master`.
std::optional<redis_endpoint> switched_to(std::string_view message, std::string_view master) {
  std::string_view words[5];
  for (std::string_view& w : words) {
    const std::size_t space = message.find(' ');
    w = message.substr(0, space);
    message = space == std::string_view::npos ? std::string_view{} : message.substr(space + 1);
  }
  if (words[0] != master || words[3].empty()) return std::nullopt;
  const std::optional<int> port = to_port(words[4]);
  if (!port) return std::nullopt;
  return redis_endpoint{std::string(words[3]), *port};
}

}  // namespace

sentinel_client::sentinel_client(std::vector<redis_endpoint> sentinels, std::string master,
                                 milliseconds timeout)
    : sentinels_(std::move(sentinels)), master_(std::move(master)), timeout_(timeout) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd (sentinel)");
}

sentinel_client::~sentinel_client() {
  if (!watchers_.empty()) {
    // The eventfd stays readable once written (nobody reads it): every watcher sees it.
    const std::uint64_t one = 1;
    while (::write(stop_fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
    for (std::thread& w : watchers_) w.join();
  }
  ::close(stop_fd_);
}

std::string sentinel_client::describe() const {
  std::string out;
  for (const redis_endpoint& s : sentinels_) {
    if (!out.empty()) out += ',';
    out += s.text();
  }
  return out + "/" + master_;
}

template <class T, class Parse>
T sentinel_client::ask_each(std::initializer_list<std::string_view> command, Parse parse) const {
  const std::size_t n = sentinels_.size();
  const std::size_t first = preferred_.load(std::memory_order_relaxed) % n;
  std::string answers;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t index = (first + i) % n;
    const redis_endpoint& at = sentinels_[index];
    std::string error;
    context_handle c = connect_with_timeouts(at.host, at.port, timeout_, timeout_, error);
    if (c) {
      if (!append_command(*c, command)) {
        error = "out of memory";
      } else if (const reply_handle r = next_reply(*c); !r) {
        error = c->errstr;
      } else if (std::optional<T> found = parse(*r, error)) {
        preferred_.store(index, std::memory_order_relaxed);
        return std::move(*found);
      }
    }
    answers += (answers.empty() ? "" : "; ") + at.text() + ": " + error;
  }
  throw no_primary("no Redis primary known for '" + master_ + "' (Sentinels: " + answers + ")");
}

redis_endpoint sentinel_client::primary() const {
  return ask_each<redis_endpoint>(
      {"SENTINEL", "get-master-addr-by-name", master_},
      [this](const redisReply& r, std::string& why) {
        std::optional<redis_endpoint> found = address_from(r);
        if (!found) {
          why = r.type == REDIS_REPLY_NIL ? "knows no master '" + master_ + "'" : describe_reply(r);
        }
        return found;
      });
}

void sentinel_client::primary_failed() noexcept {
  preferred_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<redis_endpoint> sentinel_client::replicas() const {
  return ask_each<std::vector<redis_endpoint>>(
      {"SENTINEL", "replicas", master_}, [](const redisReply& r, std::string& why) {
        std::optional<std::vector<redis_endpoint>> found;
        if (r.type != REDIS_REPLY_ARRAY) {
          why = describe_reply(r);
          return found;
        }
        found.emplace();
        for (std::size_t i = 0; i < r.elements; ++i) {
          if (std::optional<redis_endpoint> up = replica_up(*r.element[i])) {
            found->push_back(std::move(*up));
          }
        }
        return found;
      });
}

void sentinel_client::watch(std::function<void(const redis_endpoint&)> on_switch) {
  if (!watchers_.empty()) return;
  on_switch_ = std::move(on_switch);
  watchers_.reserve(sentinels_.size());
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    watchers_.emplace_back([this, i] { run_watch(i); });
  }
}

bool sentinel_client::stop_within(milliseconds ms) const {
  pollfd p{stop_fd_, POLLIN, 0};
  int rc;
  while ((rc = ::poll(&p, 1, static_cast<int>(ms.count()))) < 0 && errno == EINTR) {
  }
  return rc > 0;
}

void sentinel_client::run_watch(std::size_t index) {
  while (!watch_one(index)) {
    if (stop_within(watch_retry)) return;
  }
}

void sentinel_client::moved_to(const redis_endpoint& now, std::size_t index, bool first_look) {
  const std::lock_guard<std::mutex> lock(moves_);
  if (seen_any_ && now == last_seen_) return;
  const bool report = seen_any_ || !first_look;
  last_seen_ = now;
  seen_any_ = true;
  if (!report) return;
  // That Sentinel knows the new primary: ask it first from now on.
  preferred_.store(index, std::memory_order_relaxed);
  if (on_switch_) on_switch_(now);
}

bool sentinel_client::watch_one(std::size_t index) {
  const redis_endpoint& at = sentinels_[index];
  std::string error;
  context_handle c = connect_with_timeouts(at.host, at.port, timeout_, timeout_, error);
  if (!c) return false;
  if (!append_command(*c, {"SUBSCRIBE", switch_channel})) return false;
  if (const reply_handle r = next_reply(*c);
      !r || r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
    return false;
  }
  redisEnableKeepAlive(c.get());

  // Whatever happened while this Sentinel was not watched (nothing to report the first time
  // any primary is seen). A move is reported once: a switch message repeats what a
  // resubscription found, or what another Sentinel said, or the other way round.
  try {
    moved_to(primary(), preferred_.load(std::memory_order_relaxed), true);
  } catch (const no_primary&) {
  }

  bool ping_sent = false;
  while (true) {
    pollfd fds[2] = {{c->fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int rc = ::poll(fds, 2, static_cast<int>(watch_idle.count()));
    if (rc < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (fds[1].revents != 0) return true;
    if (rc == 0) {
      // Silent for watch_idle: a PING in subscribed mode is answered ["pong", ""].
      if (ping_sent) return false;
      int done = 0;
      if (!append_command(*c, {"PING"})) return false;
      while (done == 0) {
        if (redisBufferWrite(c.get(), &done) != REDIS_OK) return false;
      }
      ping_sent = true;
      continue;
    }
    if (redisBufferRead(c.get()) != REDIS_OK) return false;
    while (true) {
      void* raw = nullptr;
      if (redisGetReplyFromReader(c.get(), &raw) != REDIS_OK) return false;
      if (raw == nullptr) break;
      const reply_handle r(static_cast<redisReply*>(raw));
      ping_sent = false;
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !is_string(*r->element[0]) ||
          reply_text(*r->element[0]) != "message" || !is_string(*r->element[2])) {
        continue;
      }
      if (const std::optional<redis_endpoint> now =
              switched_to(reply_text(*r->element[2]), master_)) {
        moved_to(*now, index, false);
      }
    }
  }
}

}  // namespace spoold::store
