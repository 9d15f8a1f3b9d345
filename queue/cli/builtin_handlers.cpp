#include "builtin_handlers.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace spool_queue_cli {
namespace {

using spool::queue::job_context;

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("sha256: OpenSSL's digest failed");
  }
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

std::string sleep_for(const job_context& job, std::string_view payload) {
  std::int64_t ms = 0;
  const auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), ms);
  if (payload.empty() || ec != std::errc() || end != payload.data() + payload.size() || ms < 0) {
    throw std::invalid_argument("sleep: the payload must be a number of milliseconds, not \"" +
                                std::string(payload) + "\"");
  }
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::milliseconds(ms);
  // Sleeps in slices, watching the token (a cancellation token is polled, not waited on).
  while (std::chrono::steady_clock::now() < until) {
    if (job.token.cancelled()) {
      const auto slept = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      throw std::runtime_error("sleep: stopped after " + std::to_string(slept.count()) +
                               " ms (the attempt's token fired)");
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(10), until - std::chrono::steady_clock::now()));
  }
  return "slept " + std::to_string(ms) + " ms";
}

class record_file {
 public:
  explicit record_file(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
  }
  ~record_file() { ::close(fd_); }
  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;

  std::string append(const job_context& job, std::string_view payload) const {
    if (payload.starts_with("fail-first ") && job.attempt == 1) {
      throw std::runtime_error("record: failing attempt 1 as the payload asks");
    }
    const std::string line = std::string(payload) + " " + std::to_string(job.attempt) + "\n";
    const ssize_t n = ::write(fd_, line.data(), line.size());
    if (n < 0) throw std::system_error(errno, std::generic_category(), "record: write");
    if (static_cast<std::size_t>(n) != line.size()) {
      throw std::runtime_error("record: short write of " + std::to_string(n) + " bytes");
    }
    return "recorded";
  }

 private:
  int fd_;
};

}  // namespace

void register_builtin_handlers(spool::queue::worker& w, const std::string& record_path) {
  w.handle("echo",
           [](const job_context&, std::string_view payload) { return std::string(payload); });
  w.handle("sleep", sleep_for);
  w.handle("fail", [](const job_context&, std::string_view payload) -> std::string {
    throw std::runtime_error(payload.empty() ? "failed as asked" : std::string(payload));
  });
  w.handle("sha256",
           [](const job_context&, std::string_view payload) { return sha256_hex(payload); });
  if (record_path.empty()) {
    w.handle("record", [](const job_context&, std::string_view) -> std::string {
      throw std::runtime_error("record: this worker has no --record-file");
    });
    return;
  }
  auto file = std::make_shared<const record_file>(record_path);
  w.handle("record", [file](const job_context& job, std::string_view payload) {
    return file->append(job, payload);
  });
}

}  // namespace spool_queue_cli
