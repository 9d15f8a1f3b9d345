#include "child_measurement.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

namespace bench {

namespace {

// The sample on the pipe, in this machine's byte order (both ends are this program): the
// value, the number of extras, then for each extra the length of its name, the name, the value.
template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string encode(const sample& s) {
  std::string out;
  put(out, s.value);
  put(out, static_cast<std::uint32_t>(s.extras.size()));
  for (const auto& [name, value] : s.extras) {
    put(out, static_cast<std::uint32_t>(name.size()));
    out += name;
    put(out, value);
  }
  return out;
}

// Moves the next `size` bytes of `in` to `to`; false if `in` is shorter.
bool take(std::string_view& in, void* to, std::size_t size) {
  if (in.size() < size) return false;
  std::memcpy(to, in.data(), size);
  in.remove_prefix(size);
  return true;
}

// What encode() wrote, or nullopt if `in` is anything else: short (the child died while
// writing), or with bytes left over.
std::optional<sample> decode(std::string_view in) {
  sample s;
  std::uint32_t extras = 0;
  if (!take(in, &s.value, sizeof s.value) || !take(in, &extras, sizeof extras)) return {};
  for (std::uint32_t i = 0; i < extras; ++i) {
    std::uint32_t size = 0;
    double value = 0;
    if (!take(in, &size, sizeof size) || in.size() < size) return {};
    std::string name(in.substr(0, size));
    in.remove_prefix(size);
    if (!take(in, &value, sizeof value)) return {};
    s.extras.emplace_back(std::move(name), value);
  }
  if (!in.empty()) return {};
  return s;
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Up to end of file, which comes when the child exits: the pipe is O_CLOEXEC, so no program
// the child starts holds its write end open. False (errno set) if a read fails.
bool read_all(int fd, std::string& out) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) return true;
    if (n > 0)
      out.append(buffer, static_cast<std::size_t>(n));
    else if (errno != EINTR)
      return false;
  }
}

// noexcept: an exception from `run` ends the child through std::terminate (which prints it),
// as it would end spool-bench; it must never unwind into the frames above, the parent's loop.
[[noreturn]] void be_child(int fd, const std::function<sample()>& run, pid_t parent) noexcept {
  // Checking the parent after the prctl closes the race with a parent that died before it.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
  const sample s = run();
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(write_all(fd, encode(s)) ? 0 : 1);
}

child_outcome not_started(const char* call, int error) {
  return {{}, -1, std::string("could not be started: ") + call + ": " + std::strerror(error)};
}

// The outcome from the child's wait status and what it sent.
child_outcome outcome_of(int status, bool read_ok, int read_error, std::string_view bytes) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return {{}, -1, "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")"};
  }
  const int code = WEXITSTATUS(status);
  if (code != 0) return {{}, code, "exited with code " + std::to_string(code)};
  if (!read_ok) return {{}, 0, std::string("could not be read from: ") + std::strerror(read_error)};
  if (std::optional<sample> s = decode(bytes)) return {std::move(s), 0, ""};
  return {{},
          0,
          bytes.empty() ? "exited without sending its sample"
                        : "sent a malformed sample (" + std::to_string(bytes.size()) + " bytes)"};
}

}  // namespace

child_outcome run_in_child(const std::function<sample()>& run) {
  // Output still buffered here would be copied into the child and printed twice.
  std::fflush(stdout);
  std::fflush(stderr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return not_started("pipe2", errno);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(fds[0]);
    close(fds[1]);
    return not_started("fork", error);
  }
  if (pid == 0) {
    close(fds[0]);
    be_child(fds[1], run, parent);
  }
  close(fds[1]);
  std::string bytes;
  const bool read_ok = read_all(fds[0], bytes);
  const int read_error = errno;
  close(fds[0]);  // a child still writing gets EPIPE (or SIGPIPE) rather than blocking
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(pid, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  if (reaped < 0) return {{}, -1, std::string("could not be waited for: ") + std::strerror(errno)};
  return outcome_of(status, read_ok, read_error, bytes);
}

}  // namespace bench
