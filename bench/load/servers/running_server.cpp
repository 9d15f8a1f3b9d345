#include "servers/running_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace bench {

namespace {

// A socket closed however the function using it ends.
class socket_fd {
 public:
  socket_fd() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  }
  ~socket_fd() { close(fd_); }
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

std::string with_log(const std::string& what, const std::string& log) {
  return log.empty() ? what : what + "; its stderr:\n" + log;
}

}  // namespace

running_server::running_server(std::string name, std::unique_ptr<temp_dir> dir,
                               std::unique_ptr<child_process> process, std::string log_path,
                               std::uint16_t port, stop_rule stop)
    : name_(std::move(name)),
      dir_(std::move(dir)),
      process_(std::move(process)),
      log_path_(std::move(log_path)),
      port_(port),
      stop_(stop) {}

running_server::~running_server() = default;  // child_process kills what is still running

std::string running_server::log() const { return read_file(log_path_); }

void running_server::stop() {
  if (process_->exited()) {
    throw std::runtime_error(with_log(
        name_ + " had already exited (" + process_->wait().describe() + ") when asked to stop",
        log()));
  }
  process_->signal(stop_.signal);
  const auto status = process_->wait_until(child_process::clock::now() + stop_.patience);
  if (!status) {
    process_->signal_group(SIGKILL);
    process_->wait();
    throw std::runtime_error(with_log(name_ + " did not stop within " +
                                          std::to_string(stop_.patience.count()) + " s of " +
                                          strsignal(stop_.signal) + "; killed",
                                      log()));
  }
  if (!status->ok())
    throw std::runtime_error(
        with_log(name_ + " stopped with " + status->describe() + " instead of exit 0", log()));
}

std::uint16_t free_port() {
  socket_fd s;
  sockaddr_in addr = loopback(0);
  if (bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error(std::string("bind 127.0.0.1:0: ") + std::strerror(errno));
  socklen_t len = sizeof addr;
  if (getsockname(s.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error(std::string("getsockname: ") + std::strerror(errno));
  return ntohs(addr.sin_port);
}

void wait_until_listening(child_process& process, std::uint16_t port, const std::string& name,
                          const std::string& log_path, child_process::clock::duration patience) {
  const auto deadline = child_process::clock::now() + patience;
  for (;;) {
    {
      socket_fd s;
      const sockaddr_in addr = loopback(port);
      if (connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return;
      if (errno != ECONNREFUSED && errno != EINTR)
        throw std::runtime_error("connect to " + name + " on port " + std::to_string(port) + ": " +
                                 std::strerror(errno));
    }
    // An external program getting ready: poll it, with a generous deadline.
    if (auto status =
            process.wait_until(child_process::clock::now() + std::chrono::milliseconds(10))) {
      throw std::runtime_error(with_log(name + " exited (" + status->describe() +
                                            ") before listening on port " + std::to_string(port),
                                        read_file(log_path)));
    }
    if (child_process::clock::now() >= deadline)
      throw std::runtime_error(with_log(
          name + " is not listening on port " + std::to_string(port) + " after the start-up wait",
          read_file(log_path)));
  }
}

}  // namespace bench
