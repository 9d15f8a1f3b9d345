#include "app/static_files.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "app/byte_range.hpp"
#include "app/confined_open.hpp"
#include "http/mime.hpp"

namespace spoold {
namespace {

std::int64_t nanoseconds(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// What identifies one version of a file: a cached body is served only while the path still
// names the same inode with the same size, modification time and change time (the last one
// moves on chmod, so a file made unreadable stops being served from memory).
struct file_identity {
  dev_t dev = 0;
  ino_t ino = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;

  static file_identity of(const struct stat& st) {
    return {st.st_dev, st.st_ino, static_cast<std::uint64_t>(st.st_size), nanoseconds(st.st_mtim),
            nanoseconds(st.st_ctim)};
  }
  bool operator==(const file_identity&) const = default;
};

// The headers every answer about one version of a file carries, formatted once.
struct file_headers {
  std::string etag;  // "\"<hex mtime ns>-<hex size>\""
  std::int64_t mtime_s = 0;
  std::string validators;  // ETag and Last-Modified lines (all a 304 carries)
  std::string full;        // Content-Type, the validators, Accept-Ranges

  file_headers(const struct stat& st, std::string_view name) {
    file_identity id = file_identity::of(st);
    char buf[64];
    int n = std::snprintf(buf, sizeof buf, "\"%llx-%llx\"",
                          static_cast<unsigned long long>(id.mtime_ns),
                          static_cast<unsigned long long>(id.size));
    etag.assign(buf, static_cast<std::size_t>(n));
    mtime_s = st.st_mtim.tv_sec;
    validators = "ETag: " + etag + "\r\nLast-Modified: " + http::http_date(mtime_s) + "\r\n";
    full = "Content-Type: ";
    full += http::mime_type(name);
    full += "\r\n";
    full += validators;
    full += "Accept-Ranges: bytes\r\n";
  }
};

struct cached_file {
  std::string rel;  // opened path relative to the root ("docs/index.html"): revalidated by it
  file_identity id;
  file_headers headers;
  std::shared_ptr<const std::string> body;
};

// The file-system name the Content-Type is chosen by: the request's last component.
std::string_view last_component(std::string_view path) {
  std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Components starting with '.' (hidden files, and "." / ".." that the parser should already
// have resolved) are never served; neither is a path with a NUL, which the C calls would cut.
bool servable_path(std::string_view path) {
  if (path.empty() || path[0] != '/') return false;
  if (path.find('\0') != std::string_view::npos) return false;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '/' && i + 1 < path.size() && path[i + 1] == '.') return false;
  }
  return true;
}

// Weak comparison (RFC 9110 8.8.3.2) of our strong tag against an If-None-Match list.
bool none_match_hits(std::string_view list, std::string_view etag) {
  std::size_t i = 0;
  while (i < list.size()) {
    char c = list[i];
    if (c == ' ' || c == '\t' || c == ',') {
      ++i;
      continue;
    }
    if (c == '*') return true;
    if (list.compare(i, 2, "W/") == 0) i += 2;
    if (i >= list.size() || list[i] != '"') return false;  // malformed: stop, no match
    std::size_t close = list.find('"', i + 1);
    if (close == std::string_view::npos) return false;
    if (list.substr(i, close - i + 1) == etag) return true;
    i = close + 1;
  }
  return false;
}

// If-Range: the range is honoured only if the validator still matches, by strong comparison
// (a weak tag never matches) or as the exact Last-Modified date.
bool if_range_holds(std::string_view value, const file_headers& h) {
  if (value.empty()) return false;
  if (value[0] == '"' || value.substr(0, 2) == "W/") return value == h.etag;
  std::int64_t date = 0;
  return http::parse_http_date(value, date) && date == h.mtime_s;
}

// What to answer for one version of a file, before any body is attached.
struct decision {
  int status = 200;  // 200, 206, 304 or 416
  std::uint64_t first = 0;
  std::uint64_t length = 0;
};

decision decide(const http::request& r, const file_headers& h, std::uint64_t size) {
  decision d;
  d.length = size;
  if (const http::header* inm = r.find("If-None-Match")) {
    if (none_match_hits(inm->value, h.etag)) d.status = 304;
  } else if (const http::header* ims = r.find("If-Modified-Since")) {
    std::int64_t since = 0;
    if (http::parse_http_date(ims->value, since) && h.mtime_s <= since) d.status = 304;
  }
  if (d.status == 304 || r.verb != http::method::get) return d;  // ranges are for GET only

  const http::header* range = r.find("Range");
  if (range == nullptr) return d;
  if (const http::header* if_range = r.find("If-Range")) {
    if (!if_range_holds(if_range->value, h)) return d;
  }
  byte_range br = parse_range(range->value, size);
  if (br.kind == byte_range::partial) {
    d.status = 206;
    d.first = br.first;
    d.length = br.length;
  } else if (br.kind == byte_range::unsatisfiable) {
    d.status = 416;
  }
  return d;
}

void add_content_range(http::response& resp, const decision& d, std::uint64_t size) {
  char buf[96];
  int n = d.status == 206
              ? std::snprintf(buf, sizeof buf, "Content-Range: bytes %llu-%llu/%llu\r\n",
                              static_cast<unsigned long long>(d.first),
                              static_cast<unsigned long long>(d.first + d.length - 1),
                              static_cast<unsigned long long>(size))
              : std::snprintf(buf, sizeof buf, "Content-Range: bytes */%llu\r\n",
                              static_cast<unsigned long long>(size));
  resp.headers.append(buf, static_cast<std::size_t>(n));
}

// Fills `resp` for the answers that carry no file bytes (304, 416); false for the others.
bool answer_without_body(const decision& d, const file_headers& h, std::uint64_t size,
                         http::response& resp) {
  if (d.status == 304) {
    resp.status = 304;
    resp.headers = h.validators;
    return true;
  }
  if (d.status == 416) {
    resp = http::error_response(416, "The requested range is outside the file.");
    add_content_range(resp, d, size);
    return true;
  }
  return false;
}

// Percent-encodes a decoded path for a Location header: everything but unreserved characters,
// '/' and a few sub-delimiters that are safe in a path.
std::string encode_path(std::string_view path) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(path.size() + 8);
  for (unsigned char c : path) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '/' || c == '-' || c == '.' || c == '_' || c == '~' || c == '!' || c == '$' ||
                 c == '&' || c == '\'' || c == '(' || c == ')' || c == '*' || c == '+' ||
                 c == ',' || c == ';' || c == '=' || c == ':' || c == '@';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

http::response from_errno(int error) {
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return http::error_response(404, "No such file.");
    case EACCES:
    case EPERM:
    case EXDEV:
    case ELOOP:
      return http::error_response(403, "Access to this path is not allowed.");
    case ENAMETOOLONG:
      return http::error_response(414, "The path is too long.");
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return http::error_response(503, "The server is out of resources; try again.");
    default:
      return http::error_response(500, "The file could not be opened.");
  }
}

// Reads a whole small file. Returns false if the file changed while it was read (the caller
// then serves what it has without caching it).
bool read_all(int fd, const struct stat& before, std::string& out, int& error) {
  out.resize(static_cast<std::size_t>(before.st_size));
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      error = errno;
      return false;
    }
    if (n == 0) break;  // shrank meanwhile
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  struct stat after {};
  if (::fstat(fd, &after) != 0) {
    error = errno;
    return false;
  }
  return done == static_cast<std::size_t>(before.st_size) &&
         file_identity::of(after) == file_identity::of(before);
}

}  // namespace

struct static_files::impl {
  static constexpr std::size_t shard_count = 16;

  // The cache, keyed by request path. Readers take a shard's lock shared for one lookup and
  // leave with a shared_ptr, so the lock is never held across a system call.
  struct alignas(64) shard {
    mutable std::shared_mutex mu;
    std::unordered_map<std::string, std::shared_ptr<const cached_file>> files;
  };

  static_config cfg;
  confined_root root;
  std::array<shard, shard_count> shards;
  std::atomic<std::uint64_t> cached_bytes{0};

  explicit impl(static_config c) : cfg(std::move(c)), root(cfg.root) {}

  shard& shard_for(const std::string& key) {
    return shards[std::hash<std::string>{}(key) % shard_count];
  }

  std::shared_ptr<const cached_file> lookup(const std::string& key) {
    shard& s = shard_for(key);
    std::shared_lock lock(s.mu);
    auto it = s.files.find(key);
    return it == s.files.end() ? nullptr : it->second;
  }

  // Takes `bytes` out of the total budget, evicting from `s` (whose lock is held) as needed.
  bool reserve_locked(shard& s, std::uint64_t bytes) {
    while (true) {
      std::uint64_t now = cached_bytes.load(std::memory_order_relaxed);
      if (now + bytes <= cfg.cache_max_total) {
        if (cached_bytes.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed)) {
          return true;
        }
        continue;
      }
      if (s.files.empty()) return false;  // the rest of the budget is in other shards
      auto victim = s.files.begin();
      cached_bytes.fetch_sub(victim->second->id.size, std::memory_order_relaxed);
      s.files.erase(victim);
    }
  }

  void insert(const std::string& key, std::shared_ptr<const cached_file> file) {
    shard& s = shard_for(key);
    std::unique_lock lock(s.mu);
    auto it = s.files.find(key);
    if (it != s.files.end()) {
      cached_bytes.fetch_sub(it->second->id.size, std::memory_order_relaxed);
      s.files.erase(it);
    }
    if (reserve_locked(s, file->id.size)) s.files.emplace(key, std::move(file));
  }

  http::response serve(const http::request& r);
  http::response serve_cached(const http::request& r, const cached_file& f);
  http::response serve_opened(const http::request& r, const std::string& rel, confined_file cf);
  http::response serve_large(const http::request& r, const std::string& rel, confined_file cf);
};

http::response static_files::impl::serve(const http::request& r) {
  const std::string& path = r.path;
  if (path.size() >= PATH_MAX) return http::error_response(414, "The path is too long.");
  if (!servable_path(path)) return http::error_response(404, "No such file.");

  // Hot path: one fstatat. A hit needs the path to name the very inode, size and mtime that a
  // confined open found before, so the bytes served are bytes that were inside the root.
  if (std::shared_ptr<const cached_file> hit = lookup(path)) {
    struct stat st {};
    if (::fstatat(root.fd(), hit->rel.c_str(), &st, 0) == 0 && S_ISREG(st.st_mode) &&
        file_identity::of(st) == hit->id) {
      return serve_cached(r, *hit);
    }
  }

  std::string rel = path.substr(1);
  confined_file cf = root.open(rel);
  if (cf.error != 0) return from_errno(cf.error);
  if (S_ISDIR(cf.st.st_mode)) {
    if (path.back() != '/') {
      http::response resp = http::error_response(301, "Moved to the directory's address.");
      std::string location = encode_path(path) + "/";
      if (!r.query.empty()) {
        location += '?';
        location += r.query;
      }
      resp.add_header("Location", location);
      return resp;
    }
    rel += "index.html";
    cf = root.open(rel);
    if (cf.error == ENOENT || cf.error == ENOTDIR || (cf.error == 0 && S_ISDIR(cf.st.st_mode))) {
      return http::error_response(404, "No index for this directory.");  // no listings
    }
    if (cf.error != 0) return from_errno(cf.error);
  } else if (path.back() == '/') {
    return http::error_response(404, "No such directory.");  // "/file.txt/"
  }
  if (!S_ISREG(cf.st.st_mode)) return http::error_response(403, "Not a regular file.");
  return serve_opened(r, rel, std::move(cf));
}

http::response static_files::impl::serve_cached(const http::request& r, const cached_file& f) {
  http::response resp;
  decision d = decide(r, f.headers, f.id.size);
  if (answer_without_body(d, f.headers, f.id.size, resp)) {
    resp.head_only = r.verb == http::method::head;
    return resp;
  }
  resp.status = d.status;
  resp.headers = f.headers.full;
  if (d.status == 206) {
    add_content_range(resp, d, f.id.size);
    resp.body.assign(*f.body, d.first, d.length);
  } else {
    resp.shared_body = f.body;
  }
  resp.head_only = r.verb == http::method::head;
  return resp;
}

http::response static_files::impl::serve_opened(const http::request& r, const std::string& rel,
                                                confined_file cf) {
  auto size = static_cast<std::uint64_t>(cf.st.st_size);
  if (size > cfg.cache_max_file) return serve_large(r, rel, std::move(cf));

  auto body = std::make_shared<std::string>();
  int error = 0;
  bool stable = read_all(cf.fd.get(), cf.st, *body, error);
  if (error != 0) return from_errno(error);
  auto file = std::make_shared<cached_file>(cached_file{
      rel, file_identity::of(cf.st), file_headers(cf.st, last_component(rel)), std::move(body)});
  if (stable) {
    insert(r.path, file);
  } else {
    file->id.size = file->body->size();  // serve what was read; the next request rereads
  }
  return serve_cached(r, *file);
}

http::response static_files::impl::serve_large(const http::request& r, const std::string& rel,
                                               confined_file cf) {
  auto size = static_cast<std::uint64_t>(cf.st.st_size);
  file_headers h(cf.st, last_component(rel));
  http::response resp;
  decision d = decide(r, h, size);
  if (answer_without_body(d, h, size, resp)) {
    resp.head_only = r.verb == http::method::head;
    return resp;
  }
  resp.status = d.status;
  resp.headers = std::move(h.full);
  if (d.status == 206) add_content_range(resp, d, size);
  resp.file_offset = d.first;
  resp.file_length = d.length;
  resp.head_only = r.verb == http::method::head;
  // A HEAD answer sends no bytes, but Content-Length comes from file_length, which counts only
  // while a descriptor is set: keep it; the response closes it.
  resp.file_fd = cf.fd.release();
  return resp;
}

static_files::static_files(static_config cfg) : impl_(std::make_unique<impl>(std::move(cfg))) {}
static_files::~static_files() = default;

http::response static_files::serve(const http::request& r) { return impl_->serve(r); }

std::uint64_t static_files::cached_bytes() const noexcept {
  return impl_->cached_bytes.load(std::memory_order_relaxed);
}

bool static_files::uses_openat2() const noexcept { return impl_->root.uses_openat2(); }

}  // namespace spoold
