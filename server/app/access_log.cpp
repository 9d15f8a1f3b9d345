#include "app/access_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <utility>

namespace spoold {
namespace {

// "[10/Oct/2000:13:55:36 -0700]" in local time.
std::size_t format_time(std::int64_t unix_seconds, char (&out)[40]) {
  static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  auto t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (::localtime_r(&t, &tm) == nullptr) {
    int n = std::snprintf(out, sizeof out, "[@%lld]", static_cast<long long>(unix_seconds));
    return static_cast<std::size_t>(n);
  }
  long offset_min = tm.tm_gmtoff / 60;
  char sign = offset_min < 0 ? '-' : '+';
  if (offset_min < 0) offset_min = -offset_min;
  int n = std::snprintf(out, sizeof out, "[%02d/%s/%04d:%02d:%02d:%02d %c%02ld%02ld]", tm.tm_mday,
                        months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec,
                        sign, offset_min / 60, offset_min % 60);
  return static_cast<std::size_t>(n);
}

// The current second's timestamp, formatted once per second per thread (localtime_r takes a
// lock inside the C library and is not cheap).
std::string_view current_time_text() {
  struct cache {
    std::int64_t second = -1;
    char text[40];
    std::size_t length = 0;
  };
  thread_local cache c;
  std::int64_t now = std::time(nullptr);
  if (now != c.second) {
    c.length = format_time(now, c.text);
    c.second = now;
  }
  return {c.text, c.length};
}

void append_escaped(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
}

void append_line(std::string& out, std::string_view peer_ip, std::string_view time_text,
                 std::string_view request_line, int status, std::uint64_t bytes) {
  if (peer_ip.empty()) {
    out += '-';
  } else {
    append_escaped(out, peer_ip);
  }
  out += " - - ";
  out += time_text;
  out += " \"";
  append_escaped(out, request_line);
  char tail[48];
  int n = bytes == 0 ? std::snprintf(tail, sizeof tail, "\" %d -", status)
                     : std::snprintf(tail, sizeof tail, "\" %d %llu", status,
                                     static_cast<unsigned long long>(bytes));
  out.append(tail, static_cast<std::size_t>(n));
}

}  // namespace

std::string format_access_line(std::string_view peer_ip, std::string_view request_line, int status,
                               std::uint64_t bytes, std::int64_t unix_seconds) {
  char time_text[40];
  std::size_t length = format_time(unix_seconds, time_text);
  std::string out;
  append_line(out, peer_ip, std::string_view(time_text, length), request_line, status, bytes);
  return out;
}

std::unique_ptr<access_log> access_log::open(const std::string& target) {
  if (target == "-") return std::unique_ptr<access_log>(new access_log(STDOUT_FILENO, false));
  int fd = ::open(target.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "access log " + target);
  return std::unique_ptr<access_log>(new access_log(fd, true));
}

access_log::access_log(int fd, bool owns_fd) : fd_(fd), owns_fd_(owns_fd) {
  buffer_.reserve(flush_threshold + 1024);
}

access_log::~access_log() {
  flush();
  if (owns_fd_ && ::close(fd_) != 0) {
    // Nobody is left to ask; a close error on a log file (e.g. NFS) goes to stderr.
    std::fprintf(stderr, "spoold: closing the access log: %s\n",
                 std::generic_category().message(errno).c_str());
  }
}

void access_log::record(std::string_view peer_ip, std::string_view request_line, int status,
                        std::uint64_t bytes) {
  // Formatted outside the lock; only the append and the occasional write hold it.
  thread_local std::string line;
  line.clear();
  append_line(line, peer_ip, current_time_text(), request_line, status, bytes);
  line += '\n';
  std::lock_guard lock(mu_);
  const bool first = buffer_.empty();
  buffer_ += line;
  if (buffer_.size() >= flush_threshold) {
    write_locked();
  } else if (first) {
    pending_.store(true, std::memory_order_relaxed);
    lines_.notify_all();  // a flusher thread waiting in wait_for_lines
  }
}

bool access_log::wait_for_lines(std::stop_token stop) {
  std::unique_lock lock(mu_);
  return lines_.wait(lock, std::move(stop), [this] { return !buffer_.empty(); });
}

void access_log::flush() {
  std::lock_guard lock(mu_);
  write_locked();
}

std::error_code access_log::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

// Writes under the lock, so buffered lines reach the file in the order they were recorded.
void access_log::write_locked() {
  std::size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      last_error_ = std::error_code(errno, std::generic_category());
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  buffer_.clear();
  pending_.store(false, std::memory_order_relaxed);
}

}  // namespace spoold
