// access_log: the Common Log Format line, buffering with nothing lost at destruction, and many
// threads recording at once (run under TSan too).
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "app/access_log.hpp"

namespace fs = std::filesystem;
using spoold::access_log;
using spoold::format_access_line;

namespace {

// Sets the process's time zone for one test (a POSIX TZ string needs no tz database).
class time_zone {
 public:
  explicit time_zone(const char* tz) {
    const char* old = std::getenv("TZ");
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    ::setenv("TZ", tz, 1);
    ::tzset();
  }
  ~time_zone() {
    if (had_) {
      ::setenv("TZ", old_.c_str(), 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  }

 private:
  std::string old_;
  bool had_ = false;
};

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

class temp_dir : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/spoold-log-XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr) << std::strerror(errno);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

// A Common Log Format line split into its fields.
struct clf_fields {
  std::string host;
  std::string time;
  std::string request;
  int status = 0;
  std::string bytes;
};

// `pattern`: '0' a digit, 'A' an upper-case letter, 'a' a lower-case one, '+' a sign.
bool shaped_like(std::string_view text, std::string_view pattern) {
  if (text.size() != pattern.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool ok = pattern[i] == '0'   ? std::isdigit(static_cast<unsigned char>(c)) != 0
              : pattern[i] == 'A' ? std::isupper(static_cast<unsigned char>(c)) != 0
              : pattern[i] == 'a' ? std::islower(static_cast<unsigned char>(c)) != 0
              : pattern[i] == '+' ? (c == '+' || c == '-')
                                  : c == pattern[i];
    if (!ok) return false;
  }
  return true;
}

// `host - - [10/Oct/2000:13:55:36 -0700] "request" status bytes`; false if not that shape.
bool parse_clf(std::string_view line, clf_fields& out) {
  std::size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0) return false;
  out.host = line.substr(0, space);
  line.remove_prefix(space);
  if (line.substr(0, 6) != " - - [") return false;
  line.remove_prefix(6);
  if (line.size() < 27 || line[26] != ']') return false;
  out.time = line.substr(0, 26);
  if (!shaped_like(out.time, "00/Aaa/0000:00:00:00 +0000")) return false;
  line.remove_prefix(27);
  if (line.substr(0, 2) != " \"") return false;
  line.remove_prefix(2);
  std::size_t close = line.rfind("\" ");
  if (close == std::string_view::npos) return false;
  out.request = line.substr(0, close);
  line.remove_prefix(close + 2);
  if (line.size() < 5 || !shaped_like(line.substr(0, 4), "000 ")) return false;
  out.status = std::stoi(std::string(line.substr(0, 3)));
  out.bytes = line.substr(4);
  return out.bytes == "-" || out.bytes.find_first_not_of("0123456789") == std::string::npos;
}

bool is_clf(std::string_view line) {
  clf_fields f;
  return parse_clf(line, f);
}

TEST(access_log_format, CommonLogFormatInLocalTime) {
  // The example from the Apache documentation: 2000-10-10 13:55:36 at UTC-7.
  time_zone tz("XYZ+7");
  EXPECT_EQ(format_access_line("127.0.0.1", "GET /apache_pb.gif HTTP/1.0", 200, 2326, 971211336),
            "127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" 200 2326");
}

TEST(access_log_format, UtcAndHalfHourZones) {
  {
    time_zone tz("UTC0");
    EXPECT_EQ(format_access_line("::1", "HEAD / HTTP/1.1", 304, 0, 1'600'000'000),
              "::1 - - [13/Sep/2020:12:26:40 +0000] \"HEAD / HTTP/1.1\" 304 -");
  }
  {
    time_zone tz("IST-5:30");
    EXPECT_EQ(format_access_line("10.0.0.1", "GET / HTTP/1.1", 200, 1, 1'600'000'000),
              "10.0.0.1 - - [13/Sep/2020:17:56:40 +0530] \"GET / HTTP/1.1\" 200 1");
  }
}

TEST(access_log_format, EscapesWhatCouldForgeALine) {
  time_zone tz("UTC0");
  std::string line =
      format_access_line("", "GET /\"x\\y\n1.2.3.4 - - \x01\xff HTTP/1.1", 400, 12, 0);
  EXPECT_EQ(line,
            "- - - [01/Jan/1970:00:00:00 +0000] "
            "\"GET /\\\"x\\\\y\\x0A1.2.3.4 - - \\x01\\xFF HTTP/1.1\" 400 12");
  EXPECT_EQ(line.find('\n'), std::string::npos);
  clf_fields f;
  ASSERT_TRUE(parse_clf(line, f)) << line;
  EXPECT_EQ(f.status, 400);
  EXPECT_EQ(f.bytes, "12");
  // The checker the other tests rely on does reject what is not the format.
  EXPECT_FALSE(is_clf("1.2.3.4 - - [13/Sep/2020:12:26:40] \"GET / HTTP/1.1\" 200 1"));
  EXPECT_FALSE(is_clf("1.2.3.4 - - [13/Sep/2020:12:26:40 +0000] \"GET / HTTP/1.1\" 20 1"));
  EXPECT_FALSE(is_clf("1.2.3.4 - - [13/Sep/2020:12:26:40 +0000] GET / 200 1"));
}

TEST_F(temp_dir, LinesReachTheFileOnFlushAndDestruction) {
  const fs::path p = dir_ / "access.log";
  auto log = access_log::open(p.string());
  log->record("127.0.0.1", "GET / HTTP/1.1", 200, 512);
  log->record("127.0.0.1", "GET /missing HTTP/1.1", 404, 0);
  log->flush();
  std::vector<std::string> lines = read_lines(p);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(is_clf(lines[0])) << lines[0];
  EXPECT_NE(lines[0].find("\"GET / HTTP/1.1\" 200 512"), std::string::npos);
  EXPECT_NE(lines[1].find("\"GET /missing HTTP/1.1\" 404 -"), std::string::npos);

  log->record("10.1.2.3", "POST /guestbook HTTP/1.1", 303, 0);
  log.reset();  // the destructor flushes
  lines = read_lines(p);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2].substr(0, 9), "10.1.2.3 ");
  EXPECT_FALSE(access_log::open(p.string())->last_error());
}

TEST_F(temp_dir, AppendsToAnExistingFile) {
  const fs::path p = dir_ / "access.log";
  {
    std::ofstream out(p);
    out << "earlier line\n";
  }
  access_log::open(p.string())->record("1.1.1.1", "GET / HTTP/1.1", 200, 1);
  std::vector<std::string> lines = read_lines(p);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "earlier line");
}

TEST_F(temp_dir, ABigBufferIsWrittenWithoutWaitingForFlush) {
  const fs::path p = dir_ / "access.log";
  auto log = access_log::open(p.string());
  const std::string request = "GET /" + std::string(200, 'a') + " HTTP/1.1";
  int n = 0;
  while (fs::file_size(p) == 0) {
    log->record("127.0.0.1", request, 200, 1);
    ASSERT_LT(++n, 10'000) << "nothing written after " << n << " lines";
  }
  EXPECT_GE(fs::file_size(p), access_log::flush_threshold);
  log.reset();
  EXPECT_EQ(read_lines(p).size(), static_cast<std::size_t>(n));
}

TEST_F(temp_dir, ConcurrentRecordsAreWholeAndInOrderPerThread) {
  const fs::path p = dir_ / "access.log";
  constexpr int threads = 4;
  constexpr int per_thread = 5'000;
  {
    auto log = access_log::open(p.string());
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t) {
      writers.emplace_back([&log, t] {
        for (int i = 0; i < per_thread; ++i) {
          log->record("127.0.0." + std::to_string(t), "GET /" + std::to_string(i) + " HTTP/1.1",
                      200, static_cast<std::uint64_t>(i + 1));
          if (i % 1000 == 0) log->flush();
        }
      });
    }
    for (std::thread& w : writers) w.join();
  }
  std::vector<std::string> lines = read_lines(p);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(threads * per_thread));
  std::vector<int> next(threads, 0);
  for (const std::string& line : lines) {
    clf_fields f;
    ASSERT_TRUE(parse_clf(line, f)) << line;
    ASSERT_EQ(f.host.substr(0, 8), "127.0.0.") << line;
    int t = std::stoi(f.host.substr(8));
    ASSERT_GE(t, 0);
    ASSERT_LT(t, threads);
    ASSERT_EQ(f.request.substr(0, 5), "GET /") << line;
    int i = std::stoi(f.request.substr(5));
    EXPECT_EQ(f.request, "GET /" + std::to_string(i) + " HTTP/1.1");
    EXPECT_EQ(i, next[static_cast<std::size_t>(t)]++) << line;
    EXPECT_EQ(f.status, 200);
    EXPECT_EQ(f.bytes, std::to_string(i + 1));
  }
}

TEST_F(temp_dir, OpenFailureNamesThePath) {
  const std::string bad = (dir_ / "no-such-dir" / "access.log").string();
  try {
    (void)access_log::open(bad);
    FAIL() << "opened " << bad;
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory);
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST_F(temp_dir, DashWritesToStdout) {
  const fs::path p = dir_ / "stdout.txt";
  std::fflush(stdout);
  int saved = ::dup(STDOUT_FILENO);
  ASSERT_GE(saved, 0);
  int file = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(file, 0);
  ASSERT_EQ(::dup2(file, STDOUT_FILENO), STDOUT_FILENO);
  ::close(file);
  {
    auto log = access_log::open("-");
    log->record("127.0.0.1", "GET /via-stdout HTTP/1.1", 200, 7);
  }
  ASSERT_EQ(::dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
  ::close(saved);
  // stdout itself stays open after the log is gone.
  EXPECT_NE(::fcntl(STDOUT_FILENO, F_GETFD), -1);
  std::vector<std::string> lines = read_lines(p);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"GET /via-stdout HTTP/1.1\" 200 7"), std::string::npos);
}

}  // namespace
