// spool-error-recovery: continuations that see failures and recover. Each "record" is parsed
// on the pool; a bad one fails, and:
//  - then_error(const std::invalid_argument&) turns that kind of failure into a default value,
//    leaving other failures (and every value) untouched;
//  - then_try receives the ready future itself and decides from value or exception;
//  - a continuation that returns a future is unwrapped: a failed parse retries with a cleaned
//    record, as a task of its own, and the chain goes on with the retry's value;
//  - make_ready_future gives a cached result the same type as a computed one.
//
//   spool-error-recovery
#include <spool/spool.hpp>

#include <cctype>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int parse(const std::string& text) {
  std::size_t used = 0;
  const int v = std::stoi(text, &used);  // throws std::invalid_argument on no digits
  if (used != text.size()) throw std::runtime_error("trailing characters in '" + text + "'");
  return v;
}

std::string digits_only(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::isdigit(static_cast<unsigned char>(c))) out += c;
  }
  return out.empty() ? "0" : out;
}

}  // namespace

int main() {
  spool::pool pool{spool::config{.threads = 2, .name = "recover"}};
  const std::vector<std::string> records{"12", "x", "7;", "30"};

  // 1. A default for unparseable records; other failures pass through.
  int with_defaults = 0;
  int failed = 0;
  for (const std::string& r : records) {
    auto v = pool.submit([r] { return parse(r); }).then_error([](const std::invalid_argument&) {
      return 0;
    });
    try {
      with_defaults += v.get();
    } catch (const std::runtime_error& e) {
      ++failed;
      std::printf("not recovered: %s\n", e.what());
    }
  }

  // 2. then_try sees the outcome, 3. unwrapping retries as a task and goes on with its value.
  int retried = 0;
  for (const std::string& r : records) {
    auto v = pool.submit([r] { return parse(r); }).then_try([&pool, r](spool::future<int> done) {
      try {
        return spool::make_ready_future(done.get());  // the value as it is
      } catch (const std::exception&) {
        return pool.submit([r] { return parse(digits_only(r)); });  // a retry, as a task
      }
    });
    retried += v.get();
  }

  std::printf("sum with defaults: %d (%d not recovered); sum with retries: %d\n", with_defaults,
              failed, retried);
  return with_defaults == 42 && failed == 1 && retried == 49 ? 0 : 1;
}
