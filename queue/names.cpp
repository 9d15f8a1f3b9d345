#include "names.hpp"

#include "spool/queue/error.hpp"

namespace spool::queue::detail {
namespace {

constexpr std::size_t max_name = 128;
constexpr std::size_t max_key = 512;
constexpr std::size_t max_number = 64;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == ':';
}

void check_name(std::string_view what, std::string_view name) {
  const auto refuse = [&](std::string_view why) {
    throw error(errc::invalid_argument, std::string(what) + " name \"" + std::string(name) +
                                            "\": " + std::string(why) +
                                            " (1 to 128 of A-Z a-z 0-9 - _ . :)");
  };
  if (name.empty()) refuse("empty");
  if (name.size() > max_name) refuse("too long");
  for (char c : name) {
    if (c == ' ') refuse("a space is not allowed");
    if (!is_name_char(c)) refuse("'" + std::string(1, c) + "' is not allowed");
  }
}

}  // namespace

void check_queue_name(std::string_view queue) { check_name("queue", queue); }

void check_task_name(std::string_view task) { check_name("task", task); }

void check_job_key(std::string_view key) {
  if (key.size() > max_key) {
    throw error(errc::invalid_argument,
                "job key of " + std::to_string(key.size()) + " bytes: at most 512 are allowed");
  }
}

std::string queue_prefix(std::string_view queue) { return "spool:{" + std::string(queue) + "}"; }

job_ref parse_job_id(std::string_view id) {
  const std::size_t slash = id.rfind('/');
  const auto refuse = [&](std::string_view why) {
    throw error(errc::invalid_argument, "job id \"" + std::string(id) + "\": " + std::string(why) +
                                            " (expected QUEUE/NUMBER)");
  };
  if (slash == std::string_view::npos) refuse("no '/'");
  const std::string_view queue = id.substr(0, slash);
  const std::string_view number = id.substr(slash + 1);
  if (number.empty() || number.size() > max_number) refuse("no job number after '/'");
  for (char c : number) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-';
    if (!ok) refuse("the job number may only have digits, a-z and '-'");
  }
  check_queue_name(queue);
  return job_ref{std::string(queue), std::string(number)};
}

}  // namespace spool::queue::detail
