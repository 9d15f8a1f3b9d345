// JSON text of a job and of a queue's figures (admin.hpp). Strings are bytes: valid UTF-8
// passes through (control characters escaped), and each byte that is not part of valid UTF-8
// is written as \u00XX, so that any result prints as valid JSON.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "spool/queue/admin.hpp"

namespace spool::queue {
namespace {

// The length of the valid UTF-8 sequence at s[i], or 0.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  std::size_t n = 0;
  std::uint32_t min = 0;
  std::uint32_t cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    min = 0x80;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    min = 0x800;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    min = 0x10000;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  char esc[8];
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          std::snprintf(esc, sizeof esc, "\\u%04x", c);
          out += esc;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out + "\"";
}

class object {
 public:
  object& field(std::string_view name, std::string_view value) {
    return raw(name, json_string(value));
  }
  object& field(std::string_view name, std::uint64_t value) {
    return raw(name, std::to_string(value));
  }
  object& field(std::string_view name, std::int64_t value) {
    return raw(name, std::to_string(value));
  }
  object& field(std::string_view name, bool value) { return raw(name, value ? "true" : "false"); }
  object& raw(std::string_view name, std::string_view json) {
    text_ += text_.size() > 1 ? "," : "";
    text_ += json_string(name) + ":" + std::string(json);
    return *this;
  }
  std::string done() { return text_ + "}"; }

 private:
  std::string text_ = "{";
};

}  // namespace

std::string to_json(const job_status& s) {
  const char* const priorities[] = {"low", "normal", "high"};
  object o;
  o.field("id", s.id).field("queue", s.queue).field("task", s.task);
  o.field("state", to_string(s.state));
  o.field("priority", std::string_view(priorities[static_cast<int>(s.priority)]));
  o.field("key", s.key).field("attempt", s.attempt).field("attempts", s.attempts);
  o.field("failures", s.failures).field("takeovers", s.takeovers);
  o.field("outcomes", s.outcomes).field("outcome_attempt", s.outcome_attempt);
  o.field("owner", s.owner).field("result", s.result).field("error", s.error);
  o.field("payload_size", static_cast<std::uint64_t>(s.payload_size));
  o.field("created_ms", s.created_ms).field("due_ms", s.due_ms);
  o.field("started_ms", s.started_ms).field("finished_ms", s.finished_ms);
  return o.done();
}

std::string to_json(const queue_stats& s) {
  object o;
  o.field("queue", s.queue).field("queued", s.queued).field("delayed", s.delayed);
  o.field("running", s.running).field("dead", s.dead).field("submitted", s.submitted);
  o.field("done", s.done).field("failed", s.failed);
  o.field("retried", s.retried).field("died", s.died).field("cancelled", s.cancelled);
  o.field("takeovers", s.takeovers).field("handed_back", s.handed_back);
  o.field("malformed", s.malformed).field("requeued", s.requeued).field("lag_ms", s.lag_ms);
  o.field("paused", s.paused).field("max_length", s.max_length);
  std::string workers = "[";
  for (const worker_info& w : s.workers) {
    if (workers.size() > 1) workers += ",";
    workers += object()
                   .field("name", w.name)
                   .field("pending", w.pending)
                   .field("idle_ms", w.idle_ms)
                   .done();
  }
  o.raw("workers", workers + "]");
  return o.done();
}

}  // namespace spool::queue
