#include "driver_common.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace spool_queue_bench {

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void fail(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::exit(1);
}

std::string store_url(const std::string& url) {
  const std::string prefix = "redis://";
  if (url.rfind(prefix, 0) != 0) fail("--redis " + url + ": expected redis://HOST:PORT[/0]");
  const std::size_t slash = url.find('/', prefix.size());
  if (slash == std::string::npos) return url;
  if (url.substr(slash) != "/0") fail("--redis " + url + ": spool's queue uses database 0 only");
  return url.substr(0, slash);
}

std::map<std::string, std::string> parse_args(int argc, char** argv, const char* usage,
                                              const std::vector<std::string>& flags) {
  std::map<std::string, std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string w = argv[i];
    if (w.rfind("--", 0) != 0) fail(std::string("unexpected argument ") + w + "\n" + usage);
    if (std::find(flags.begin(), flags.end(), w) != flags.end()) {
      out[w] = "";
    } else if (i + 1 < argc) {
      out[w] = argv[++i];
    } else {
      fail(w + " needs a value\n" + usage);
    }
  }
  return out;
}

std::string required(const std::map<std::string, std::string>& a, const std::string& name,
                     const char* usage) {
  const auto it = a.find(name);
  if (it == a.end()) fail(name + " is required\n" + usage);
  return it->second;
}

}  // namespace spool_queue_bench
