// A real redis-server for unit tests: started on a free loopback port with no persistence,
// stopped with SIGTERM (and waited for) by stop() or the destructor. restart() brings it back
// on the same port, to test that clients recover. Extra arguments (e.g. "--replicaof",
// "127.0.0.1 PORT") are passed on.
#pragma once

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

extern char** environ;

namespace spoold_test {

// The redis-server binary, or "" if there is none on PATH.
inline std::string find_redis_server() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = dir + "/redis-server";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// A port nothing listens on right now: bind port 0 and ask which one the kernel chose. (Another
// process could take it before redis-server does; start() reports that as a failure to start.)
inline int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    close(fd);
    throw std::system_error(e, std::generic_category(), "bind/getsockname");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

class redis_server {
 public:
  explicit redis_server(std::string binary, std::vector<std::string> extra_args = {})
      : binary_(std::move(binary)),
        extra_args_(std::move(extra_args)),
        port_(free_loopback_port()) {
    dir_ = std::filesystem::temp_directory_path() /
           ("spoold-redis-" + std::to_string(getpid()) + "-" + std::to_string(port_));
    std::filesystem::create_directories(dir_);
    start();
  }
  ~redis_server() {
    stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  [[nodiscard]] int port() const noexcept { return port_; }
  [[nodiscard]] std::string spec() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // Starts redis-server on port() and waits until it answers PING.
  void start() {
    if (pid_ > 0) return;
    const std::string port = std::to_string(port_);
    const std::string log = (dir_ / "redis.log").string();
    std::vector<std::string> args = {binary_,  "--port", port,           "--bind",    "127.0.0.1",
                                     "--save", "",       "--appendonly", "no",        "--daemonize",
                                     "no",     "--dir",  dir_.string(),  "--logfile", log};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    const int rc = posix_spawn(&pid_, binary_.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      throw std::system_error(rc, std::generic_category(), "posix_spawn " + binary_);
    }
    wait_until_ready(log);
  }

  // SIGTERM, then waits for the process to exit: afterwards the port refuses connections.
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

  void restart() {
    stop();
    start();
  }

 private:
  void wait_until_ready(const std::string& log) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("redis-server exited at start; its log:\n" + read_file(log));
      }
      if (answers_ping()) return;
      // Polling an external process until it is ready (not synchronisation between threads).
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop();
    throw std::runtime_error("redis-server did not answer PING within 20 s; its log:\n" +
                             read_file(log));
  }

  bool answers_ping() const {
    const timeval tv{1, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (c == nullptr) return false;
    bool ok = false;
    if (c->err == 0) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
      if (r != nullptr) freeReplyObject(r);
    }
    redisFree(c);
    return ok;
  }

  static std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string binary_;
  std::vector<std::string> extra_args_;
  int port_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
};

// A direct hiredis connection, for checking the raw keys a store wrote.
class redis_client {
 public:
  explicit redis_client(int port) {
    const timeval tv{2, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c_ == nullptr || c_->err != 0) {
      const std::string why = c_ != nullptr ? c_->errstr : "out of memory";
      if (c_ != nullptr) redisFree(c_);
      throw std::runtime_error("redis_client: " + why);
    }
  }
  ~redis_client() { redisFree(c_); }
  redis_client(const redis_client&) = delete;
  redis_client& operator=(const redis_client&) = delete;

  // Runs a command given as separate arguments (binary-safe); the caller frees the reply with
  // freeReplyObject, or uses reply_ptr.
  struct reply_deleter {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
  };
  using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

  reply_ptr command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (r == nullptr) throw std::runtime_error(std::string("redis_client: ") + c_->errstr);
    return reply_ptr(r);
  }

 private:
  redisContext* c_ = nullptr;
};

}  // namespace spoold_test
