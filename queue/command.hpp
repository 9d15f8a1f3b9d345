// One Redis command: its arguments, binary-safe, built up with add().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spool::queue::detail {

class command {
 public:
  command() = default;
  explicit command(std::initializer_list<std::string_view> args) {
    for (std::string_view a : args) add(a);
  }
  command& add(std::string_view a) {
    args_.emplace_back(a);
    return *this;
  }
  command& add(std::uint64_t n) { return add(std::string_view(std::to_string(n))); }
  command& add(std::int64_t n) { return add(std::string_view(std::to_string(n))); }
  command& add(unsigned n) { return add(static_cast<std::uint64_t>(n)); }
  command& add(int n) { return add(static_cast<std::int64_t>(n)); }
  [[nodiscard]] const std::vector<std::string>& args() const noexcept { return args_; }
  // "FCALL spool_claim": the first words, for messages.
  [[nodiscard]] std::string name() const;

 private:
  std::vector<std::string> args_;
};

// FCALL NAME 1 PREFIX QUEUE: the start of every call of the queue's functions.
command fcall(std::string_view function, std::string_view queue);

}  // namespace spool::queue::detail
