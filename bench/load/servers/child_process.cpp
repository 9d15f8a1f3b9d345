#include "servers/child_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace bench {

namespace {

[[noreturn]] void fail(const std::string& what, int error) {
  throw std::runtime_error(what + ": " + std::strerror(error));
}

// posix_spawn's attributes and file actions, released however the spawn ends.
class spawn_setup {
 public:
  spawn_setup() {
    if (int e = posix_spawnattr_init(&attr_)) fail("posix_spawnattr_init", e);
    if (int e = posix_spawn_file_actions_init(&actions_)) {
      posix_spawnattr_destroy(&attr_);
      fail("posix_spawn_file_actions_init", e);
    }
  }
  ~spawn_setup() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }
  spawn_setup(const spawn_setup&) = delete;
  spawn_setup& operator=(const spawn_setup&) = delete;

  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
};

// A process group of its own (so the whole tree can be signalled), no blocked signals, and the
// default action for the signals spool-load-bench might ignore or handle: a server that inherited
// an ignored SIGTERM would not stop.
void set_attributes(posix_spawnattr_t& attr) {
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2})
    sigaddset(&defaults, sig);
  if (int e = posix_spawnattr_setpgroup(&attr, 0)) fail("posix_spawnattr_setpgroup", e);
  if (int e = posix_spawnattr_setsigmask(&attr, &none)) fail("posix_spawnattr_setsigmask", e);
  if (int e = posix_spawnattr_setsigdefault(&attr, &defaults))
    fail("posix_spawnattr_setsigdefault", e);
  const short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (int e = posix_spawnattr_setflags(&attr, flags)) fail("posix_spawnattr_setflags", e);
}

class pipe_ends {
 public:
  pipe_ends() {
    if (pipe2(fds_, O_CLOEXEC) != 0) fail("pipe2", errno);
  }
  ~pipe_ends() {
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }
  pipe_ends(const pipe_ends&) = delete;
  pipe_ends& operator=(const pipe_ends&) = delete;
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  int release_read_end() { return std::exchange(fds_[0], -1); }

 private:
  int fds_[2] = {-1, -1};
};

double seconds_of(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; }

int millis_until(child_process::clock::time_point deadline) {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - child_process::clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 60'000));
}

// The process groups of the children now running. They are not in spool-load-bench's group, so a
// Ctrl-C at the terminal does not reach them: spool-load-bench's own SIGINT, SIGTERM or SIGHUP
// kills them before it dies, or servers would outlive it on their ports. Slots are claimed
// and cleared with atomics so that the handler may read them at any moment.
constexpr std::size_t max_live_children = 64;
std::atomic<pid_t> live_groups[max_live_children];

extern "C" void kill_children_and_die(int sig) {
  for (auto& slot : live_groups)
    if (const pid_t group = slot.load(std::memory_order_relaxed); group > 0)
      ::kill(-group, SIGKILL);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_cleanup_handlers() {
  static const bool installed = [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      // A signal spool-load-bench's caller chose to ignore stays ignored.
      if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction act {};
      act.sa_handler = kill_children_and_die;
      sigemptyset(&act.sa_mask);
      if (sigaction(sig, &act, nullptr) != 0) fail("sigaction", errno);
    }
    return true;
  }();
  (void)installed;
}

void remember_group(pid_t group) {
  for (auto& slot : live_groups) {
    pid_t empty = 0;
    if (slot.compare_exchange_strong(empty, group)) return;
  }
  // More children at once than slots: this one would merely not be cleaned up on a signal.
}

void forget_group(pid_t group) {
  for (auto& slot : live_groups) {
    pid_t expected = group;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

// spool-load-bench's environment with `changes` ("NAME=VALUE") replacing entries of the same name.
std::vector<std::string> environment_with(const std::vector<std::string>& changes) {
  const auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const bool replaced = std::any_of(changes.begin(), changes.end(), [&](const std::string& c) {
      return name_of(c) == name_of(entry);
    });
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), changes.begin(), changes.end());
  return env;
}

// /proc/PID/stat, or "" if the process is gone. Read with read(2): a process that exits
// between readdir and the read makes read fail with ESRCH, which std::ifstream would turn into
// an exception (a forking server's children come and go all the time).
std::string proc_stat_of(const char* pid) {
  const std::string path = std::string("/proc/") + pid + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[1024];  // one line of about 300 bytes
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

std::string exit_status::describe() const {
  if (signal != 0)
    return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit " + std::to_string(code);
}

child_process::child_process(const launch& how) {
  if (how.argv.empty()) throw std::invalid_argument("child_process: no program given");
  if (how.stderr_to_stdout && !how.capture_stdout)
    throw std::invalid_argument("child_process: stderr_to_stdout needs capture_stdout");
  spawn_setup setup;
  set_attributes(setup.attr_);
  std::optional<pipe_ends> out;
  if (how.capture_stdout) {
    out.emplace();
    if (int e = posix_spawn_file_actions_adddup2(&setup.actions_, out->write_end(), STDOUT_FILENO))
      fail("posix_spawn_file_actions_adddup2", e);
    if (how.stderr_to_stdout)
      if (int e =
              posix_spawn_file_actions_adddup2(&setup.actions_, out->write_end(), STDERR_FILENO))
        fail("posix_spawn_file_actions_adddup2", e);
  }
  if (!how.stderr_to_stdout && !how.stderr_file.empty())
    if (int e = posix_spawn_file_actions_addopen(&setup.actions_, STDERR_FILENO,
                                                 how.stderr_file.c_str(),
                                                 O_WRONLY | O_CREAT | O_TRUNC, 0644))
      fail("posix_spawn_file_actions_addopen " + how.stderr_file, e);
  if (!how.cwd.empty())
    if (int e = posix_spawn_file_actions_addchdir_np(&setup.actions_, how.cwd.c_str()))
      fail("posix_spawn_file_actions_addchdir_np " + how.cwd, e);

  std::vector<char*> argv;
  for (const std::string& a : how.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> env = environment_with(how.environment);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  install_cleanup_handlers();
  // spawnp: "wrk" is found on PATH; a path with a slash is taken as it is.
  if (int e = posix_spawnp(&pid_, argv[0], &setup.actions_, &setup.attr_, argv.data(),
                           how.environment.empty() ? environ : envp.data()))
    fail("cannot start " + how.argv[0], e);
  remember_group(pid_);
  if (out) stdout_fd_ = out->release_read_end();  // the write end closes with `out`
}

child_process::~child_process() {
  if (!status_) {
    // Only our own child's group: its id is the child's pid (POSIX_SPAWN_SETPGROUP, 0).
    ::kill(-pid_, SIGKILL);
    try {
      reap(true);
    } catch (const std::exception&) {  // a destructor must not throw; nothing left to do
    }
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

std::optional<std::string> child_process::read_line(clock::time_point deadline) {
  if (stdout_fd_ < 0) throw std::logic_error("child_process: stdout is not captured");
  for (;;) {
    if (const auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    if (stdout_eof_) return std::nullopt;
    pollfd p{stdout_fd_, POLLIN, 0};
    const int ready = poll(&p, 1, millis_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail("poll", errno);
    if (ready == 0) {
      if (clock::now() >= deadline) return std::nullopt;
      continue;
    }
    read_some();
  }
}

std::string child_process::read_all() {
  if (stdout_fd_ < 0) throw std::logic_error("child_process: stdout is not captured");
  while (!stdout_eof_) read_some();
  return std::exchange(pending_, {});
}

std::optional<std::string> child_process::read_all(clock::time_point deadline) {
  if (stdout_fd_ < 0) throw std::logic_error("child_process: stdout is not captured");
  while (!stdout_eof_) {
    pollfd p{stdout_fd_, POLLIN, 0};
    const int ready = poll(&p, 1, millis_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail("poll", errno);
    if (ready > 0)
      read_some();
    else if (clock::now() >= deadline)
      return std::nullopt;
  }
  return std::exchange(pending_, {});
}

void child_process::read_some() {
  char buf[4096];
  const ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return;
  if (n < 0) fail("read from child", errno);
  if (n == 0) stdout_eof_ = true;
  pending_.append(buf, static_cast<std::size_t>(n));
}

void child_process::signal(int sig) {
  if (status_) return;  // reaped: the pid may belong to someone else by now
  if (::kill(pid_, sig) != 0) fail("kill " + std::to_string(pid_), errno);
}

void child_process::signal_group(int sig) {
  if (status_) return;
  if (::kill(-pid_, sig) != 0 && errno != ESRCH) fail("kill -" + std::to_string(pid_), errno);
}

std::optional<exit_status> child_process::reap(bool block) {
  if (status_) return status_;
  int st = 0;
  rusage ru{};
  pid_t r;
  do {
    r = wait4(pid_, &st, block ? 0 : WNOHANG, &ru);
  } while (r < 0 && errno == EINTR);
  if (r < 0) fail("wait4 " + std::to_string(pid_), errno);
  if (r == 0) return std::nullopt;
  exit_status s;
  if (WIFEXITED(st)) s.code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) s.signal = WTERMSIG(st);
  s.cpu_s = seconds_of(ru.ru_utime) + seconds_of(ru.ru_stime);
  status_ = s;
  forget_group(pid_);
  return status_;
}

std::optional<exit_status> child_process::wait_until(clock::time_point deadline) {
  if (status_) return status_;
  // A pidfd becomes readable when the child exits: wait for that instead of polling waitpid.
  // The raw system call: glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++ callers.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd < 0) fail("pidfd_open " + std::to_string(pid_), errno);
  for (;;) {
    pollfd p{pidfd, POLLIN, 0};
    const int ready = poll(&p, 1, millis_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    const int error = errno;
    if (ready < 0) {
      close(pidfd);
      fail("poll pidfd", error);
    }
    if (ready > 0 || clock::now() >= deadline) break;
  }
  close(pidfd);
  return reap(false);
}

exit_status child_process::wait() { return *reap(true); }

double process_tree_cpu_seconds(pid_t root) {
  // /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces and parentheses, so the
  // fields are counted from the last ')'. utime and stime are fields 14 and 15.
  struct entry {
    pid_t ppid = 0;
    double cpu_ticks = 0;
  };
  std::map<pid_t, entry> procs;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) fail("opendir /proc", errno);
  while (const dirent* d = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    const std::string text = proc_stat_of(d->d_name);
    const auto paren = text.rfind(')');
    if (paren == std::string::npos) continue;  // exited while we looked
    std::istringstream fields(text.substr(paren + 1));
    std::string state;
    long ppid = 0;
    std::string skip;
    fields >> state >> ppid;
    for (int i = 5; i <= 13; ++i) fields >> skip;
    unsigned long long utime = 0, stime = 0;
    long long cutime = 0, cstime = 0;
    if (!(fields >> utime >> stime >> cutime >> cstime)) continue;
    // cutime and cstime: the CPU of children this process has reaped. A server that forks a
    // process per connection (spoold --model forking) would otherwise lose each child's CPU
    // the moment it is reaped, and its figure could even go down.
    procs[static_cast<pid_t>(pid)] = {
        static_cast<pid_t>(ppid),
        static_cast<double>(utime + stime) + static_cast<double>(std::max(0LL, cutime + cstime))};
  }
  closedir(dir);

  double ticks = 0;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    if (auto it = procs.find(p); it != procs.end()) ticks += it->second.cpu_ticks;
    for (const auto& [pid, e] : procs)
      if (e.ppid == p) todo.push_back(pid);
  }
  const long hz = sysconf(_SC_CLK_TCK);
  return ticks / static_cast<double>(hz > 0 ? hz : 100);
}

std::string version_line(const std::string& program, const std::string& flag) {
  try {
    child_process child({{program, flag}, "", true, true, ""});
    // A version line comes at once; a program that hangs instead is killed by the destructor.
    const std::optional<std::string> output =
        child.read_all(child_process::clock::now() + std::chrono::seconds(10));
    if (!output) return "";
    const std::string& text = *output;
    child.wait();
    std::string line = text.substr(0, text.find('\n'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    return line;
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace bench
