// The worker's /metrics over HTTP/1.1 (one request per connection): a thread that accepts on
// ADDR:PORT and answers GET /metrics with the worker's Prometheus text, anything else 404.
#pragma once

#include <functional>
#include <string>
#include <thread>

namespace spool_queue_cli {

class metrics_endpoint {
 public:
  // Binds and listens (port 0: the kernel's choice); throws std::system_error.
  metrics_endpoint(const std::string& address, int port, std::function<std::string()> text);
  ~metrics_endpoint();
  metrics_endpoint(const metrics_endpoint&) = delete;
  metrics_endpoint& operator=(const metrics_endpoint&) = delete;

  [[nodiscard]] int port() const noexcept { return port_; }

 private:
  void run();
  void serve(int client);

  std::function<std::string()> text_;
  int listener_ = -1;
  int stop_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace spool_queue_cli
