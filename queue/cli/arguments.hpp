// The command line's words: options with values, durations ("250ms", "2s", "1.5" = seconds,
// "1m", "1h"), counts and priorities, each refused with a message naming the option.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "spool/spool.hpp"

namespace spool_queue_cli {

// A usage error: the message is printed with the usage line; exit status 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::chrono::milliseconds parse_duration(std::string_view option, std::string_view text);
std::uint64_t parse_count(std::string_view option, std::string_view text, std::uint64_t max);
spool::priority parse_priority(std::string_view text);

// The words after the command, split into positional ones and --options. An option listed
// in `flags` takes no value; every other one takes the next word (or --opt=value).
class arguments {
 public:
  arguments(std::vector<std::string> words, const std::vector<std::string>& with_value,
            const std::vector<std::string>& flags);
  [[nodiscard]] const std::vector<std::string>& positional() const noexcept { return positional_; }
  [[nodiscard]] std::optional<std::string> value(std::string_view option) const;
  [[nodiscard]] bool flag(std::string_view option) const;

 private:
  std::vector<std::string> positional_;
  std::vector<std::pair<std::string, std::string>> values_;
  std::vector<std::string> flags_set_;
};

}  // namespace spool_queue_cli
