#include "arguments.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace spool_queue_cli {

std::chrono::milliseconds parse_duration(std::string_view option, std::string_view text) {
  const auto refuse = [&] {
    throw usage_error(std::string(option) + " " + std::string(text) +
                      ": expected a duration such as 250ms, 2s, 1.5 (seconds), 3m or 1h");
  };
  std::size_t unit_at = text.find_first_not_of("0123456789.");
  const std::string_view number = text.substr(0, unit_at);
  const std::string_view unit = unit_at == std::string_view::npos ? "" : text.substr(unit_at);
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size()) refuse();
  double ms = 0;
  if (unit == "ms") {
    ms = value;
  } else if (unit.empty() || unit == "s") {
    ms = value * 1000;
  } else if (unit == "m") {
    ms = value * 60000;
  } else if (unit == "h") {
    ms = value * 3600000;
  } else {
    refuse();
  }
  if (!std::isfinite(ms) || ms > 1e15) refuse();
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(ms)));
}

std::uint64_t parse_count(std::string_view option, std::string_view text, std::uint64_t max) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n > max) {
    throw usage_error(std::string(option) + " " + std::string(text) +
                      ": expected a whole number from 0 to " + std::to_string(max));
  }
  return n;
}

spool::priority parse_priority(std::string_view text) {
  if (text == "low") return spool::priority::low;
  if (text == "normal") return spool::priority::normal;
  if (text == "high") return spool::priority::high;
  throw usage_error("--priority " + std::string(text) + ": expected low, normal or high");
}

arguments::arguments(std::vector<std::string> words, const std::vector<std::string>& with_value,
                     const std::vector<std::string>& flags) {
  const auto has = [](const std::vector<std::string>& list, std::string_view w) {
    return std::find(list.begin(), list.end(), w) != list.end();
  };
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (!w.starts_with("--") || w == "--") {
      positional_.push_back(w);
      continue;
    }
    const std::size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    if (has(flags, name)) {
      if (eq != std::string::npos) throw usage_error(name + " takes no value");
      flags_set_.push_back(name);
    } else if (has(with_value, name)) {
      if (eq != std::string::npos) {
        values_.emplace_back(name, w.substr(eq + 1));
      } else if (i + 1 < words.size()) {
        values_.emplace_back(name, words[++i]);
      } else {
        throw usage_error(name + " needs a value");
      }
    } else {
      throw usage_error("unknown option " + name);
    }
  }
}

std::optional<std::string> arguments::value(std::string_view option) const {
  std::optional<std::string> out;
  for (const auto& [name, v] : values_) {
    if (name == option) out = v;  // the last one counts
  }
  return out;
}

bool arguments::flag(std::string_view option) const {
  return std::find(flags_set_.begin(), flags_set_.end(), option) != flags_set_.end();
}

}  // namespace spool_queue_cli
