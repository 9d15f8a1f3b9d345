#include "app/confined_open.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define SPOOLD_HAVE_OPENAT2 1
#endif

namespace spoold {

unique_fd& unique_fd::operator=(unique_fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

unique_fd::~unique_fd() {
  // close() failing on a descriptor we only read from loses nothing; there is no one to tell.
  if (fd_ >= 0) ::close(fd_);
}

namespace {

constexpr int max_symlinks = 40;  // as the kernel's own limit for one resolution
constexpr int read_flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

confined_file failure(int error) {
  confined_file out;
  out.error = error;
  return out;
}

// Fills `out` from an open descriptor (fstat), or records why not.
confined_file finish(unique_fd fd) {
  confined_file out;
  if (::fstat(fd.get(), &out.st) != 0) return failure(errno);
  out.fd = std::move(fd);
  return out;
}

// Splits "a/b//c" into {"c", "b", "a"}: reversed, so the next component is at the back.
void push_components(std::string_view path, std::vector<std::string>& pending) {
  std::vector<std::string> forward;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t slash = path.find('/', i);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > i) forward.emplace_back(path.substr(i, slash - i));
    i = slash + 1;
  }
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) pending.push_back(std::move(*it));
}

#ifdef SPOOLD_HAVE_OPENAT2
long call_openat2(int dir, const char* path, std::uint64_t flags, std::uint64_t resolve) {
  open_how how{};
  how.flags = flags;
  how.resolve = resolve;
  return ::syscall(SYS_openat2, dir, path, &how, sizeof how);
}
#endif

// The manual walk's state: the directories entered below the root (the root itself is not on
// the stack) and the components still to resolve, next one at the back.
class walker {
 public:
  walker(int root, const std::string& real_root) : root_(root), real_root_(real_root) {}

  confined_file run(std::string_view rel) {
    push_components(rel, pending_);
    while (!pending_.empty()) {
      std::string name = std::move(pending_.back());
      pending_.pop_back();
      if (name == ".") continue;
      if (name == "..") {
        if (dirs_.empty()) return failure(EXDEV);
        dirs_.pop_back();
        continue;
      }
      if (name[0] == '.') return failure(ENOENT);  // hidden, even when a symlink points there
      int error = pending_.empty() ? open_last(name) : enter(name);
      if (error != 0) return failure(error);
      if (result_.fd) return std::move(result_);
    }
    // The path ended on a directory ("", "." or ".." last, or a target ending in '/').
    long fd = ::openat(current(), ".", O_PATH | O_CLOEXEC);
    if (fd < 0) return failure(errno);
    return finish(unique_fd(static_cast<int>(fd)));
  }

 private:
  [[nodiscard]] int current() const { return dirs_.empty() ? root_ : dirs_.back().get(); }

  // An intermediate component: a directory to enter or a symlink to expand.
  int enter(const std::string& name) {
    unique_fd fd(::openat(current(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return errno;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return errno;
    if (S_ISLNK(st.st_mode)) return expand(name);
    if (!S_ISDIR(st.st_mode)) return ENOTDIR;
    dirs_.push_back(std::move(fd));
    return 0;
  }

  // The last component: opened for reading if it is a regular file (O_NOFOLLOW: a symlink
  // fails with ELOOP and is expanded instead).
  int open_last(const std::string& name) {
    unique_fd fd(::openat(current(), name.c_str(), read_flags | O_NOFOLLOW));
    if (fd) {
      result_ = finish(std::move(fd));
      return result_.error;
    }
    int error = errno;
    if (error == ELOOP) return expand(name);
    if (error == ENOENT || error == ENOTDIR) return error;
    // Not openable for reading (a socket says ENXIO; no read permission says EACCES): report
    // what it is, so the caller can tell "not a regular file" from "permission denied".
    unique_fd path_fd(::openat(current(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!path_fd) return errno;
    struct stat st {};
    if (::fstat(path_fd.get(), &st) != 0) return errno;
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return error;
    result_.st = st;
    result_.fd = std::move(path_fd);
    return 0;
  }

  // Replaces the symlink `name` (in the current directory) by its target's components.
  int expand(const std::string& name) {
    if (++links_ > max_symlinks) return ELOOP;
    char buf[PATH_MAX];
    ssize_t n = ::readlinkat(current(), name.c_str(), buf, sizeof buf);
    if (n < 0) return errno;
    if (static_cast<std::size_t>(n) == sizeof buf) return ENAMETOOLONG;
    std::string_view target(buf, static_cast<std::size_t>(n));
    if (!target.empty() && target[0] == '/') {
      // An absolute target is followed only when it names a place under the root's canonical
      // path; the walk then restarts from the root.
      if (real_root_ != "/") {
        if (target.substr(0, real_root_.size()) != real_root_) return EXDEV;
        target.remove_prefix(real_root_.size());
        if (!target.empty() && target[0] != '/') return EXDEV;  // "/srv/www2" vs "/srv/www"
      }
      dirs_.clear();
    }
    push_components(target, pending_);
    return 0;
  }

  int root_;
  const std::string& real_root_;
  std::vector<unique_fd> dirs_;
  std::vector<std::string> pending_;
  int links_ = 0;
  confined_file result_;
};

}  // namespace

confined_root::confined_root(const std::string& dir) {
  root_ = unique_fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_) throw std::system_error(errno, std::generic_category(), "static root " + dir);
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(dir.c_str(), nullptr), &std::free);
  if (!real) throw std::system_error(errno, std::generic_category(), "static root " + dir);
  real_root_ = real.get();
#ifdef SPOOLD_HAVE_OPENAT2
  // Older kernels say ENOSYS; a seccomp filter that does not know the call may say EPERM.
  long probe = call_openat2(root_.get(), ".", O_PATH | O_CLOEXEC, RESOLVE_BENEATH);
  if (probe >= 0) {
    ::close(static_cast<int>(probe));
    openat2_ = true;
  }
#endif
}

confined_file confined_root::open(std::string_view rel) const {
#ifdef SPOOLD_HAVE_OPENAT2
  if (openat2_) {
    // The common case, no symlink on the way, in one call. Any symlink makes the kernel refuse
    // (ELOOP) and the walk decides, so a symlink into a hidden directory is judged the same way
    // whichever path runs.
    std::string path(rel.empty() ? std::string_view(".") : rel);
    long fd =
        call_openat2(root_.get(), path.c_str(), read_flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
    if (fd >= 0) return finish(unique_fd(static_cast<int>(fd)));
    int error = errno;
    switch (error) {
      case ENOENT:
      case ENOTDIR:
      case ENAMETOOLONG:
      case EMFILE:
      case ENFILE:
      case ENOMEM:
        return failure(error);
      default:
        // ELOOP (a symlink), EXDEV, EAGAIN (a concurrent rename), EACCES/ENXIO (something
        // not readable: the walk says what it is).
        break;
    }
  }
#endif
  return open_by_walk(rel);
}

confined_file confined_root::open_by_walk(std::string_view rel) const {
  walker w(root_.get(), real_root_);
  return w.run(rel);
}

}  // namespace spoold
