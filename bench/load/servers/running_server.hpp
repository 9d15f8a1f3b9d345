// running_server.hpp: a server under test, started fresh for one measurement: its process
// tree, the port it listens on, and how it is stopped. nginx.hpp and spoold.hpp start one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "servers/child_process.hpp"
#include "servers/temp_dir.hpp"

namespace bench {

class running_server {
 public:
  struct stop_rule {
    int signal;                     // the server's graceful stop
    std::chrono::seconds patience;  // how long it may take before the group is killed
  };

  // `dir` holds the server's files and is removed after the process has gone; `log_path`
  // (in it) is where the server reports errors.
  running_server(std::string name, std::unique_ptr<temp_dir> dir,
                 std::unique_ptr<child_process> process, std::string log_path, std::uint16_t port,
                 stop_rule stop);
  ~running_server();  // an unstopped server is killed (SIGKILL to its group)
  running_server(const running_server&) = delete;
  running_server& operator=(const running_server&) = delete;

  const std::string& name() const { return name_; }
  std::uint16_t port() const { return port_; }
  pid_t pid() const { return process_->pid(); }
  // CPU seconds used so far by the server and every process it forked.
  double cpu_seconds() const { return process_tree_cpu_seconds(process_->pid()); }
  // What the server wrote to its error log (for error messages).
  std::string log() const;

  // Sends the stop signal and waits. Throws std::runtime_error if the server does not exit
  // within its patience (its group is then killed) or exits other than with status 0.
  void stop();

 private:
  std::string name_;
  std::unique_ptr<temp_dir> dir_;  // declared before process_: outlives it
  std::unique_ptr<child_process> process_;
  std::string log_path_;
  std::uint16_t port_;
  stop_rule stop_;
};

// A server that can be started any number of times: the name its rows carry ("nginx",
// "spoold", "spoold epoll") and how to start a fresh one.
struct server_kind {
  std::string name;
  std::function<std::unique_ptr<running_server>()> start;
};

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released), for
// servers that cannot be told to pick one themselves.
std::uint16_t free_port();

// Waits until 127.0.0.1:port accepts a connection. Throws std::runtime_error, with the
// server's error log, if `process` exits first or the deadline passes.
void wait_until_listening(child_process& process, std::uint16_t port, const std::string& name,
                          const std::string& log_path, child_process::clock::duration patience);

}  // namespace bench
