// Opening a path beneath a root directory without ever leaving it.
//
// Symlinks are followed only while they stay inside the root: openat2(RESOLVE_BENEATH) does the
// whole walk in one call where the kernel has it (Linux 5.6+); otherwise, and whenever it
// refuses a symlink it cannot judge (an absolute target, which may still point inside the root),
// a manual walk opens one component at a time with O_NOFOLLOW from directory descriptors it
// holds, reads each symlink and resolves it against those descriptors. ".." in a symlink target
// pops the walk's own stack of descriptors; it never asks the kernel for a parent, so renaming a
// directory out of the root during the walk cannot carry the walk with it.
#pragma once

#include <sys/stat.h>

#include <string>
#include <string_view>

namespace spoold {

// An owned file descriptor (closed on destruction).
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(o.release()) {}
  unique_fd& operator=(unique_fd&& o) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd();

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// What open_beneath found. `error` is 0 on success, else:
//   ENOENT / ENOTDIR  nothing there (also: a hidden component inside a symlink's target)
//   EACCES            permission denied by the file system
//   EXDEV             a symlink leads outside the root
//   ELOOP             too many symlinks
//   ENAMETOOLONG      the path or a symlink target is too long
//   others            what the failing system call said (EMFILE, ENOMEM, EIO...)
struct confined_file {
  unique_fd fd;  // O_RDONLY|O_NONBLOCK for a regular file; O_PATH for anything else
  struct stat st {};
  int error = 0;
};

class confined_root {
 public:
  // Throws std::system_error (naming the directory) if it cannot be opened.
  explicit confined_root(const std::string& dir);

  // Opens `rel`: '/'-separated, relative to the root ("" or "." is the root itself). Only a
  // regular file is opened for reading (O_NONBLOCK, so a FIFO cannot block the caller; a
  // regular file ignores the flag); anything else comes back as an O_PATH descriptor with its
  // stat, for the caller to refuse or to look inside (a directory's index).
  [[nodiscard]] confined_file open(std::string_view rel) const;

  // The same, always by the manual walk (tests use it to exercise the fallback).
  [[nodiscard]] confined_file open_by_walk(std::string_view rel) const;

  [[nodiscard]] int fd() const noexcept { return root_.get(); }
  [[nodiscard]] bool uses_openat2() const noexcept { return openat2_; }

 private:
  unique_fd root_;
  std::string real_root_;  // canonical absolute path, to judge absolute symlink targets
  bool openat2_ = false;
};

}  // namespace spoold
