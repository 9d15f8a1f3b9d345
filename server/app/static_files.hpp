// Static files under --root: confinement, validators, ranges, and a small-file cache.
//
// Nothing outside the root is served (see confined_open.hpp): a path is opened beneath the root
// directory's descriptor with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where the kernel
// has it, and any symlink on the way is judged by a manual walk, one component at a time with
// O_NOFOLLOW, that follows a symlink only while its target stays inside the root (403
// otherwise). Hidden components (a name starting with '.') are 404, also as a symlink's target;
// anything that is not a regular file or a directory is 403; directories are never listed.
//
// The hot path for a cached small file is one fstatat: the cache entry remembers the inode,
// size, mtime and ctime that a confined open found, and serves its bytes only while the path
// still names exactly that.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "http/request.hpp"
#include "http/response.hpp"

namespace spoold {

struct static_config {
  std::string root;                          // directory; must exist
  std::uint64_t cache_max_file = 64 * 1024;  // files up to this size are kept in memory
  std::uint64_t cache_max_total = 64 * 1024 * 1024;
};

class static_files {
 public:
  explicit static_files(static_config cfg);  // throws std::system_error if root cannot be opened
  ~static_files();
  static_files(const static_files&) = delete;
  static_files& operator=(const static_files&) = delete;

  // GET or HEAD of r.path. Gives 200 (index.html for a directory; a directory path without a
  // trailing slash: 301 to path + "/"), 206 for a satisfiable single Range ("bytes=a-b", "a-",
  // "-n"; If-Range honoured), 416 with "Content-Range: bytes */size" for an unsatisfiable one,
  // 304 for If-None-Match / If-Modified-Since matches, 403 for forbidden paths, 404 otherwise.
  // Sets Content-Type, ETag ("<hex mtime ns>-<hex size>"), Last-Modified, Accept-Ranges.
  // Cached bodies are revalidated by fstatat (mtime, size, inode) on every request.
  // Thread-safe; does not block beyond file-system metadata calls.
  http::response serve(const http::request& r);

  // Bytes of file bodies held in the cache now (at most cfg.cache_max_total).
  [[nodiscard]] std::uint64_t cached_bytes() const noexcept;
  // Whether paths are opened with openat2(RESOLVE_BENEATH) or only by the manual walk.
  [[nodiscard]] bool uses_openat2() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace spoold
