// static_files on temporary directories: confinement (symlinks in and out, hidden files),
// directories, validators, ranges, the small-file cache and its revalidation, large files.
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "app/byte_range.hpp"
#include "app/confined_open.hpp"
#include "app/static_files.hpp"
#include "http/request.hpp"
#include "http/response.hpp"

namespace fs = std::filesystem;
using spoold::byte_range;
using spoold::parse_range;
using spoold::static_config;
using spoold::static_files;

namespace {

// A request built by hand; header names and values live in `storage_` (a deque: push_back
// keeps earlier elements in place, so the string_views stay valid).
class test_request {
 public:
  explicit test_request(std::string path, spoold::http::method verb = spoold::http::method::get) {
    r_.verb = verb;
    r_.path = std::move(path);
  }
  test_request& header(std::string name, std::string value) {
    storage_.push_back(std::move(name));
    std::string_view n = storage_.back();
    storage_.push_back(std::move(value));
    r_.headers.push_back({n, storage_.back()});
    return *this;
  }
  test_request& query(std::string q) {
    storage_.push_back(std::move(q));
    r_.query = storage_.back();
    return *this;
  }
  const spoold::http::request& get() const { return r_; }

 private:
  std::deque<std::string> storage_;
  spoold::http::request r_;
};

// The value of header `name` in a response's header block, "" if absent.
std::string header_value(const spoold::http::response& resp, std::string_view name) {
  std::string_view h = resp.headers;
  std::string key = std::string(name) + ": ";
  std::size_t at = 0;
  while (at < h.size()) {
    std::size_t end = h.find("\r\n", at);
    if (end == std::string_view::npos) end = h.size();
    std::string_view line = h.substr(at, end - at);
    if (line.substr(0, key.size()) == key) return std::string(line.substr(key.size()));
    at = end + 2;
  }
  return "";
}

void write_file(const fs::path& p, std::string_view content) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  ASSERT_TRUE(out.good()) << p;
}

// Sets a file's modification time exactly (two writes within one clock tick would otherwise
// leave it unchanged).
void set_mtime(const fs::path& p, time_t seconds, long nanoseconds = 0) {
  struct timespec times[2] = {{seconds, nanoseconds}, {seconds, nanoseconds}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, 0), 0) << p << ": " << std::strerror(errno);
}

std::string body_of(const spoold::http::response& resp) {
  if (resp.file_fd < 0) return std::string(resp.memory_body());
  std::string out(resp.file_length, '\0');
  ssize_t n = ::pread(resp.file_fd, out.data(), out.size(), static_cast<off_t>(resp.file_offset));
  EXPECT_EQ(n, static_cast<ssize_t>(out.size()));
  return out;
}

class temp_tree : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/spoold-static-XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr) << std::strerror(errno);
    base_ = fs::canonical(templ);
    fs::permissions(base_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
    root_ = base_ / "root";
    outside_ = base_ / "outside";
    fs::create_directories(root_ / "sub");
    fs::create_directories(root_ / "empty");
    fs::create_directories(root_ / ".git");
    fs::create_directories(root_ / "my dir");
    fs::create_directories(outside_);
    write_file(root_ / "hello.txt", "hello, world\n");
    write_file(root_ / "index.html", "<h1>root index</h1>");
    write_file(root_ / "sub" / "index.html", "<h1>sub index</h1>");
    write_file(root_ / "sub" / "page.html", "<p>page</p>");
    write_file(root_ / "sub" / ".hidden", "hidden");
    write_file(root_ / ".secret", "secret");
    write_file(root_ / ".git" / "config", "[core]");
    write_file(root_ / "my dir" / "index.html", "spaced");
    write_file(outside_ / "secret.txt", "outside secret");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }

  static_files make(std::uint64_t max_file = 64 * 1024, std::uint64_t max_total = 1 << 20) {
    return static_files(static_config{root_.string(), max_file, max_total});
  }

  fs::path base_, root_, outside_;
};

using spoold::http::method;

TEST_F(temp_tree, ServesAFileWithTypeAndValidators) {
  static_files files = make();
  auto resp = files.serve(test_request("/hello.txt").get());
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(body_of(resp), "hello, world\n");
  EXPECT_NE(header_value(resp, "Content-Type").find("text/plain"), std::string::npos);
  EXPECT_EQ(header_value(resp, "Accept-Ranges"), "bytes");
  struct stat st {};
  ASSERT_EQ(::stat((root_ / "hello.txt").c_str(), &st), 0);
  char etag[64];
  std::snprintf(
      etag, sizeof etag, "\"%llx-%llx\"",
      static_cast<unsigned long long>(st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec),
      static_cast<unsigned long long>(st.st_size));
  EXPECT_EQ(header_value(resp, "ETag"), etag);
  EXPECT_EQ(header_value(resp, "Last-Modified"), spoold::http::http_date(st.st_mtim.tv_sec));
  EXPECT_FALSE(resp.head_only);
}

TEST_F(temp_tree, DirectoriesServeTheirIndex) {
  static_files files = make();
  auto root = files.serve(test_request("/").get());
  EXPECT_EQ(root.status, 200);
  EXPECT_EQ(body_of(root), "<h1>root index</h1>");
  EXPECT_NE(header_value(root, "Content-Type").find("text/html"), std::string::npos);
  auto sub = files.serve(test_request("/sub/").get());
  EXPECT_EQ(sub.status, 200);
  EXPECT_EQ(body_of(sub), "<h1>sub index</h1>");
}

TEST_F(temp_tree, DirectoryWithoutSlashRedirects) {
  static_files files = make();
  auto plain = files.serve(test_request("/sub").get());
  EXPECT_EQ(plain.status, 301);
  EXPECT_EQ(header_value(plain, "Location"), "/sub/");
  auto with_query = files.serve(test_request("/sub").query("a=1&b=2").get());
  EXPECT_EQ(header_value(with_query, "Location"), "/sub/?a=1&b=2");
  auto spaced = files.serve(test_request("/my dir").get());
  EXPECT_EQ(spaced.status, 301);
  EXPECT_EQ(header_value(spaced, "Location"), "/my%20dir/");
  EXPECT_EQ(body_of(files.serve(test_request("/my dir/").get())), "spaced");
}

TEST_F(temp_tree, MissingThingsAre404) {
  static_files files = make();
  EXPECT_EQ(files.serve(test_request("/empty/").get()).status, 404);  // no listings
  EXPECT_EQ(files.serve(test_request("/nope.txt").get()).status, 404);
  EXPECT_EQ(files.serve(test_request("/nodir/x.txt").get()).status, 404);
  EXPECT_EQ(files.serve(test_request("/hello.txt/x").get()).status, 404);
  EXPECT_EQ(files.serve(test_request("/hello.txt/").get()).status, 404);
  std::string with_nul = "/hello.txt";
  with_nul += '\0';
  with_nul += ".html";
  EXPECT_EQ(files.serve(test_request(with_nul).get()).status, 404);
}

TEST_F(temp_tree, HiddenFilesAre404) {
  static_files files = make();
  EXPECT_EQ(files.serve(test_request("/.secret").get()).status, 404);
  EXPECT_EQ(files.serve(test_request("/.git/config").get()).status, 404);
  EXPECT_EQ(files.serve(test_request("/.git/").get()).status, 404);
  EXPECT_EQ(files.serve(test_request("/sub/.hidden").get()).status, 404);
  // Paths the parser would have normalised away are refused all the same.
  EXPECT_EQ(files.serve(test_request("/../outside/secret.txt").get()).status, 404);
  EXPECT_EQ(files.serve(test_request("/sub/../hello.txt").get()).status, 404);
}

TEST_F(temp_tree, SymlinksInsideAreFollowedAndOutsideRefused) {
  fs::create_symlink("hello.txt", root_ / "rel-inside");
  fs::create_symlink(root_ / "sub" / "page.html", root_ / "abs-inside");
  fs::create_symlink("../hello.txt", root_ / "sub" / "up-inside");
  fs::create_symlink("sub", root_ / "alias");
  fs::create_symlink(outside_ / "secret.txt", root_ / "abs-outside");
  fs::create_symlink("../outside/secret.txt", root_ / "rel-outside");
  fs::create_symlink(outside_, root_ / "dir-outside");
  fs::create_symlink("../../outside", root_ / "sub" / "dir-outside2");
  fs::create_symlink(".secret", root_ / "to-hidden");
  fs::create_symlink("loop", root_ / "loop");
  fs::create_symlink(base_ / "root-sibling", root_ / "prefix-trick");  // "<root>-sibling"
  fs::create_directories(base_ / "root-sibling");
  write_file(base_ / "root-sibling" / "x", "x");
  if (fs::exists("/etc/hostname")) fs::create_symlink("/etc/hostname", root_ / "hostname");

  static_files files = make();
  auto inside = files.serve(test_request("/rel-inside").get());
  EXPECT_EQ(inside.status, 200);
  EXPECT_EQ(body_of(inside), "hello, world\n");
  EXPECT_EQ(body_of(files.serve(test_request("/abs-inside").get())), "<p>page</p>");
  EXPECT_EQ(body_of(files.serve(test_request("/sub/up-inside").get())), "hello, world\n");
  EXPECT_EQ(body_of(files.serve(test_request("/alias/page.html").get())), "<p>page</p>");
  EXPECT_EQ(files.serve(test_request("/alias").get()).status, 301);

  EXPECT_EQ(files.serve(test_request("/abs-outside").get()).status, 403);
  EXPECT_EQ(files.serve(test_request("/rel-outside").get()).status, 403);
  EXPECT_EQ(files.serve(test_request("/dir-outside/secret.txt").get()).status, 403);
  EXPECT_EQ(files.serve(test_request("/sub/dir-outside2/secret.txt").get()).status, 403);
  EXPECT_EQ(files.serve(test_request("/prefix-trick/x").get()).status, 403);
  EXPECT_EQ(files.serve(test_request("/loop").get()).status, 403);
  EXPECT_EQ(files.serve(test_request("/to-hidden").get()).status, 404);
  if (fs::exists(root_ / "hostname")) {
    EXPECT_EQ(files.serve(test_request("/hostname").get()).status, 403);
  }
}

// The manual walk (the fallback without openat2, and the judge of every symlink) and the
// default open agree on every path.
TEST_F(temp_tree, WalkAndDefaultOpenAgree) {
  fs::create_symlink("hello.txt", root_ / "rel-inside");
  fs::create_symlink(root_ / "hello.txt", root_ / "abs-inside");
  fs::create_symlink(outside_ / "secret.txt", root_ / "abs-outside");
  fs::create_symlink("../outside", root_ / "dir-outside");
  fs::create_symlink("sub/", root_ / "alias");

  spoold::confined_root root(root_.string());
  struct expectation {
    const char* path;
    int error;
  };
  const expectation cases[] = {
      {"hello.txt", 0},
      {"sub", 0},
      {"", 0},
      {"rel-inside", 0},
      {"abs-inside", 0},
      {"alias/page.html", 0},
      {"alias", 0},
      {"nope", ENOENT},
      {"hello.txt/x", ENOTDIR},
      {"abs-outside", EXDEV},
      {"dir-outside/secret.txt", EXDEV},
  };
  for (const expectation& c : cases) {
    spoold::confined_file by_default = root.open(c.path);
    spoold::confined_file by_walk = root.open_by_walk(c.path);
    EXPECT_EQ(by_default.error, c.error) << c.path;
    EXPECT_EQ(by_walk.error, c.error) << c.path;
    if (c.error == 0) {
      EXPECT_EQ(by_default.st.st_ino, by_walk.st.st_ino) << c.path;
      EXPECT_TRUE(by_walk.fd) << c.path;
    }
  }
}

TEST_F(temp_tree, NonRegularFilesAre403) {
  ASSERT_EQ(::mkfifo((root_ / "fifo").c_str(), 0644), 0) << std::strerror(errno);
  static_files files = make();
  // O_NONBLOCK: opening a FIFO nobody writes to must not hang the caller.
  EXPECT_EQ(files.serve(test_request("/fifo").get()).status, 403);
  spoold::confined_root root(root_.string());
  EXPECT_EQ(root.open_by_walk("fifo").error, 0);
  EXPECT_TRUE(S_ISFIFO(root.open_by_walk("fifo").st.st_mode));
}

// Permission checks: as root the file system would let everything through, so the check runs
// on a thread whose file-system uid is "nobody" (setfsuid is per thread and drops the
// capability that overrides permissions).
TEST_F(temp_tree, PermissionDeniedIs403) {
  write_file(root_ / "private.txt", "private");
  fs::create_directories(root_ / "locked");
  write_file(root_ / "locked" / "in.txt", "in");
  static_files files = make();
  // Cached while readable: the chmod below must still take effect (it moves the ctime).
  ASSERT_EQ(files.serve(test_request("/private.txt").get()).status, 200);
  fs::permissions(root_ / "private.txt", fs::perms::none);
  fs::permissions(root_ / "locked", fs::perms::none);

  int private_status = 0;
  int locked_status = 0;
  int public_status = 0;
  bool dropped = false;
  std::thread t([&] {
    if (::geteuid() == 0) {
      ::syscall(SYS_setfsuid, 65534);
      if (::syscall(SYS_setfsuid, -1) != 65534) return;
    }
    // If the file is still readable, this environment keeps the override: nothing to test.
    int probe = ::open((root_ / "private.txt").c_str(), O_RDONLY | O_CLOEXEC);
    if (probe >= 0) {
      ::close(probe);
      ::syscall(SYS_setfsuid, 0);
      return;
    }
    dropped = true;
    private_status = files.serve(test_request("/private.txt").get()).status;
    locked_status = files.serve(test_request("/locked/in.txt").get()).status;
    public_status = files.serve(test_request("/hello.txt").get()).status;
    ::syscall(SYS_setfsuid, 0);
  });
  t.join();
  fs::permissions(root_ / "locked", fs::perms::owner_all);
  if (!dropped) GTEST_SKIP() << "cannot drop file-system permissions here";
  EXPECT_EQ(private_status, 403);
  EXPECT_EQ(locked_status, 403);
  EXPECT_EQ(public_status, 200);
}

TEST_F(temp_tree, IfNoneMatchGives304) {
  static_files files = make();
  auto first = files.serve(test_request("/hello.txt").get());
  std::string etag = header_value(first, "ETag");
  std::string last_modified = header_value(first, "Last-Modified");
  ASSERT_FALSE(etag.empty());

  for (const std::string& value :
       {etag, "\"other\", " + etag, "W/" + etag, std::string("*"), "\"x\",W/" + etag + " "}) {
    auto resp = files.serve(test_request("/hello.txt").header("If-None-Match", value).get());
    EXPECT_EQ(resp.status, 304) << value;
    EXPECT_EQ(header_value(resp, "ETag"), etag);
    EXPECT_EQ(header_value(resp, "Last-Modified"), last_modified);
    EXPECT_EQ(resp.body_length(), 0u);
  }
  auto other = files.serve(test_request("/hello.txt").header("If-None-Match", "\"nope\"").get());
  EXPECT_EQ(other.status, 200);
  EXPECT_EQ(body_of(other), "hello, world\n");
  auto head =
      files.serve(test_request("/hello.txt", method::head).header("If-None-Match", etag).get());
  EXPECT_EQ(head.status, 304);
}

TEST_F(temp_tree, IfModifiedSinceGives304) {
  set_mtime(root_ / "hello.txt", 1'600'000'000, 500);
  static_files files = make();
  using spoold::http::http_date;
  auto same = files.serve(
      test_request("/hello.txt").header("If-Modified-Since", http_date(1'600'000'000)).get());
  EXPECT_EQ(same.status, 304);
  EXPECT_EQ(header_value(same, "Last-Modified"), http_date(1'600'000'000));
  auto later = files.serve(
      test_request("/hello.txt").header("If-Modified-Since", http_date(1'700'000'000)).get());
  EXPECT_EQ(later.status, 304);
  auto earlier = files.serve(
      test_request("/hello.txt").header("If-Modified-Since", http_date(1'599'999'999)).get());
  EXPECT_EQ(earlier.status, 200);
  auto garbage =
      files.serve(test_request("/hello.txt").header("If-Modified-Since", "yesterday").get());
  EXPECT_EQ(garbage.status, 200);
  // If-None-Match, when present, decides alone.
  auto both = files.serve(test_request("/hello.txt")
                              .header("If-None-Match", "\"nope\"")
                              .header("If-Modified-Since", http_date(1'700'000'000))
                              .get());
  EXPECT_EQ(both.status, 200);
}

struct range_case {
  const char* header;
  int status;
  const char* body;           // expected body for 200/206
  const char* content_range;  // "" when none
};

TEST_F(temp_tree, Ranges) {
  static_files files = make();
  // "hello, world\n" is 13 bytes.
  const range_case cases[] = {
      {"bytes=0-4", 206, "hello", "bytes 0-4/13"},
      {"bytes=7-", 206, "world\n", "bytes 7-12/13"},
      {"bytes=-6", 206, "world\n", "bytes 7-12/13"},
      {"bytes=-100", 206, "hello, world\n", "bytes 0-12/13"},
      {"bytes=7-100", 206, "world\n", "bytes 7-12/13"},
      {"bytes=12-12", 206, "\n", "bytes 12-12/13"},
      {"Bytes = 0-0", 200, "hello, world\n", ""},  // space before '=': malformed, ignored
      {"BYTES=0-0", 206, "h", "bytes 0-0/13"},
      {"bytes= 1-2 ", 206, "el", "bytes 1-2/13"},
      {"bytes=13-", 416, "", "bytes */13"},
      {"bytes=100-200", 416, "", "bytes */13"},
      {"bytes=-0", 416, "", "bytes */13"},
      {"bytes=0-1,3-4", 200, "hello, world\n", ""},
      {"bytes=0-1,", 206, "he", "bytes 0-1/13"},
      {"bytes=abc", 200, "hello, world\n", ""},
      {"bytes=5-2", 200, "hello, world\n", ""},
      {"bytes=-", 200, "hello, world\n", ""},
      {"items=0-1", 200, "hello, world\n", ""},
      {"bytes=99999999999999999999-", 200, "hello, world\n", ""},
  };
  for (const range_case& c : cases) {
    auto resp = files.serve(test_request("/hello.txt").header("Range", c.header).get());
    EXPECT_EQ(resp.status, c.status) << c.header;
    EXPECT_EQ(header_value(resp, "Content-Range"), c.content_range) << c.header;
    if (c.status != 416) {
      EXPECT_EQ(body_of(resp), c.body) << c.header;
    }
  }
  // HEAD ignores Range (RFC 9110: ranges are defined for GET).
  auto head =
      files.serve(test_request("/hello.txt", method::head).header("Range", "bytes=0-1").get());
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.head_only);
  EXPECT_EQ(head.body_length(), 13u);
}

TEST_F(temp_tree, IfRangeDecidesBetweenPartAndWhole) {
  set_mtime(root_ / "hello.txt", 1'600'000'000);
  static_files files = make();
  std::string etag = header_value(files.serve(test_request("/hello.txt").get()), "ETag");
  auto ranged = [&](const std::string& if_range) {
    return files
        .serve(test_request("/hello.txt")
                   .header("Range", "bytes=0-4")
                   .header("If-Range", if_range)
                   .get())
        .status;
  };
  EXPECT_EQ(ranged(etag), 206);
  EXPECT_EQ(ranged("\"stale\""), 200);
  EXPECT_EQ(ranged("W/" + etag), 200);  // If-Range needs a strong match
  EXPECT_EQ(ranged(spoold::http::http_date(1'600'000'000)), 206);
  EXPECT_EQ(ranged(spoold::http::http_date(1'600'000'001)), 200);
  EXPECT_EQ(ranged("not a date"), 200);
}

TEST(parse_range, Forms) {
  byte_range r = parse_range("bytes=10-19", 100);
  EXPECT_EQ(r.kind, byte_range::partial);
  EXPECT_EQ(r.first, 10u);
  EXPECT_EQ(r.length, 10u);
  r = parse_range("bytes=-1", 100);
  EXPECT_EQ(r.first, 99u);
  EXPECT_EQ(r.length, 1u);
  EXPECT_EQ(parse_range("bytes=0-", 0).kind, byte_range::unsatisfiable);
  EXPECT_EQ(parse_range("bytes=-5", 0).kind, byte_range::unsatisfiable);
  EXPECT_EQ(parse_range("", 100).kind, byte_range::whole);
  EXPECT_EQ(parse_range("bytes=", 100).kind, byte_range::whole);
  EXPECT_EQ(parse_range("bytes=1-2-3", 100).kind, byte_range::whole);
  EXPECT_EQ(parse_range("bytes=+1-2", 100).kind, byte_range::whole);
  r = parse_range("bytes=0-18446744073709551615", 100);
  EXPECT_EQ(r.kind, byte_range::partial);
  EXPECT_EQ(r.length, 100u);
}

TEST_F(temp_tree, CacheRevalidatesChangedFiles) {
  static_files files = make();
  const fs::path p = root_ / "hello.txt";
  set_mtime(p, 1'600'000'000);
  EXPECT_EQ(body_of(files.serve(test_request("/hello.txt").get())), "hello, world\n");
  EXPECT_GT(files.cached_bytes(), 0u);

  // Same size, new content and mtime.
  write_file(p, "HELLO, WORLD\n");
  set_mtime(p, 1'600'000'100);
  auto same_size = files.serve(test_request("/hello.txt").get());
  EXPECT_EQ(body_of(same_size), "HELLO, WORLD\n");

  // Different size.
  write_file(p, "short\n");
  set_mtime(p, 1'600'000'200);
  EXPECT_EQ(body_of(files.serve(test_request("/hello.txt").get())), "short\n");

  // A new inode renamed over the old path, even with the same size and mtime.
  write_file(root_ / "next.tmp", "other\n");
  set_mtime(root_ / "next.tmp", 1'600'000'200);
  fs::rename(root_ / "next.tmp", p);
  EXPECT_EQ(body_of(files.serve(test_request("/hello.txt").get())), "other\n");

  // Removed: a cached entry does not outlive its file.
  fs::remove(p);
  EXPECT_EQ(files.serve(test_request("/hello.txt").get()).status, 404);
}

TEST_F(temp_tree, CachedSymlinkRetargetedOutsideIsRefused) {
  fs::create_symlink("hello.txt", root_ / "link");
  static_files files = make();
  EXPECT_EQ(files.serve(test_request("/link").get()).status, 200);
  fs::remove(root_ / "link");
  fs::create_symlink(outside_ / "secret.txt", root_ / "link");
  EXPECT_EQ(files.serve(test_request("/link").get()).status, 403);
}

TEST_F(temp_tree, CacheStaysWithinItsBudget) {
  for (int i = 0; i < 8; ++i) {
    write_file(root_ / ("f" + std::to_string(i)), std::string(400, static_cast<char>('a' + i)));
  }
  static_files files = make(1024, 1000);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 8; ++i) {
      auto resp = files.serve(test_request("/f" + std::to_string(i)).get());
      EXPECT_EQ(body_of(resp), std::string(400, static_cast<char>('a' + i)));
      EXPECT_LE(files.cached_bytes(), 1000u);
    }
  }
}

TEST_F(temp_tree, LargeFilesAreSentFromTheirDescriptor) {
  std::string big(10'000, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  write_file(root_ / "big.bin", big);
  static_files files = make(1024);

  auto whole = files.serve(test_request("/big.bin").get());
  EXPECT_EQ(whole.status, 200);
  ASSERT_GE(whole.file_fd, 0);
  EXPECT_EQ(whole.file_offset, 0u);
  EXPECT_EQ(whole.file_length, big.size());
  EXPECT_EQ(whole.body_length(), big.size());
  EXPECT_TRUE(whole.memory_body().empty());
  EXPECT_EQ(body_of(whole), big);
  EXPECT_EQ(::fcntl(whole.file_fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_EQ(files.cached_bytes(), 0u);

  auto part = files.serve(test_request("/big.bin").header("Range", "bytes=5000-5099").get());
  EXPECT_EQ(part.status, 206);
  EXPECT_EQ(part.file_offset, 5000u);
  EXPECT_EQ(part.file_length, 100u);
  EXPECT_EQ(body_of(part), big.substr(5000, 100));
  EXPECT_EQ(header_value(part, "Content-Range"), "bytes 5000-5099/10000");

  auto head = files.serve(test_request("/big.bin", method::head).get());
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.head_only);
  EXPECT_EQ(head.body_length(), big.size());

  std::string etag = header_value(whole, "ETag");
  auto not_modified = files.serve(test_request("/big.bin").header("If-None-Match", etag).get());
  EXPECT_EQ(not_modified.status, 304);
  EXPECT_LT(not_modified.file_fd, 0);
}

TEST_F(temp_tree, HeadOfASmallFile) {
  static_files files = make();
  auto head = files.serve(test_request("/hello.txt", method::head).get());
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.head_only);
  EXPECT_EQ(head.body_length(), 13u);
  EXPECT_FALSE(header_value(head, "ETag").empty());
}

TEST_F(temp_tree, OverlongPathIs414) {
  static_files files = make();
  std::string path = "/";
  path.append(PATH_MAX + 10, 'a');
  EXPECT_EQ(files.serve(test_request(path).get()).status, 414);
}

TEST_F(temp_tree, MissingRootThrows) {
  EXPECT_THROW(static_files(static_config{(base_ / "no-such-dir").string()}), std::system_error);
}

// Readers on several threads while a writer keeps replacing the file: every answer is one
// whole version, with the ETag of that version.
TEST_F(temp_tree, ConcurrentReadersSeeWholeVersions) {
  const fs::path p = root_ / "hello.txt";
  auto version = [](int v) { return std::string(100 + v % 7, static_cast<char>('A' + v % 26)); };
  write_file(p, version(0));
  static_files files = make();
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      while (!stop.load(std::memory_order_relaxed)) {
        auto resp = files.serve(test_request(t % 2 == 0 ? "/hello.txt" : "/").get());
        if (resp.status != 200) bad.fetch_add(1);  // rename is atomic: never missing
        std::string b = body_of(resp);
        if (resp.status == 200 && b.size() > 30 &&
            b.find_first_not_of(b.empty() ? 'A' : b[0]) != std::string::npos) {
          bad.fetch_add(1);
        }
      }
    });
  }
  for (int v = 1; v <= 200; ++v) {
    write_file(root_ / "next.tmp", version(v));
    set_mtime(root_ / "next.tmp", 1'600'000'000 + v);
    fs::rename(root_ / "next.tmp", p);
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(body_of(files.serve(test_request("/hello.txt").get())), version(200));
}

}  // namespace
