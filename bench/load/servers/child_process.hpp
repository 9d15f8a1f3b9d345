// child_process.hpp: a program spool-load-bench starts and stops (a server under test, the load
// generator), and the CPU time a process and its descendants have used, from /proc.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace bench {

// How a child ended, with the CPU it used (from wait4's rusage: itself and the children it
// reaped).
struct exit_status {
  int code = -1;   // exit code, or -1 if killed by a signal
  int signal = 0;  // the signal that killed it, or 0
  double cpu_s = 0;

  bool ok() const { return code == 0; }
  std::string describe() const;  // "exit 0", "killed by signal 9"
};

// Started with posix_spawn in a process group of its own, so that it and whatever it forks (an
// nginx master's workers) can be signalled together. Not copyable; the destructor kills the
// group (SIGKILL) and reaps the child if it is still running, so that an exception in the
// middle of a measurement never leaves a server behind.
class child_process {
 public:
  struct launch {
    std::vector<std::string> argv;  // argv[0] is the program's path
    std::string cwd;                // empty: spool-load-bench's own
    bool capture_stdout = false;    // a pipe, read with read_line() / read_all()
    bool stderr_to_stdout = false;  // stderr into the same pipe (capture_stdout required)
    std::string stderr_file;        // otherwise a file, or empty: spool-load-bench's stderr
    // "NAME=VALUE" entries that replace or add to spool-load-bench's environment (siege's HOME).
    std::vector<std::string> environment = {};
  };
  using clock = std::chrono::steady_clock;

  explicit child_process(const launch& how);  // throws std::runtime_error
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }

  // The next line of the captured stdout, without its newline; nullopt at end of file or when
  // the deadline passes first.
  std::optional<std::string> read_line(clock::time_point deadline);
  // The rest of the captured stdout, up to end of file (the child's exit).
  std::string read_all();
  // The same, unless the deadline passes first: then nullopt (what was read stays pending).
  std::optional<std::string> read_all(clock::time_point deadline);

  void signal(int sig);        // to the child itself; throws if it cannot be sent
  void signal_group(int sig);  // to its whole process group
  // Reaps the child if it has exited by the deadline; nullopt if it is still running.
  std::optional<exit_status> wait_until(clock::time_point deadline);
  exit_status wait();
  bool exited() const { return status_.has_value(); }

 private:
  std::optional<exit_status> reap(bool block);
  // One read of the captured stdout into pending_ (nothing if interrupted); at end of file,
  // sets stdout_eof_.
  void read_some();

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;  // read from stdout, not yet returned as a line
  bool stdout_eof_ = false;
  std::optional<exit_status> status_;
};

// utime + stime, in seconds, of `root` and every process descended from it that is still
// alive (all threads of each), plus the CPU of the children they reaped (cutime + cstime),
// from /proc/PID/stat.
double process_tree_cpu_seconds(pid_t root);

// The first line a program prints for `--version` or `-v` (nginx and wrk print theirs on
// stderr, and wrk exits 1): "nginx version: nginx/1.22.1". Empty if it cannot be run.
std::string version_line(const std::string& program, const std::string& flag);

}  // namespace bench
