// temp_dir.hpp: a directory of its own for one server run (its configuration, pid file, logs,
// database), removed with everything in it when the run is over.
#pragma once

#include <string>

namespace bench {

class temp_dir {
 public:
  // Under $TMPDIR, else /tmp: "<prefix>-XXXXXX". Throws std::runtime_error.
  explicit temp_dir(const std::string& prefix);
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `text` to `path`, replacing it; throws std::runtime_error.
void write_file(const std::string& path, const std::string& text);
// The file's content, or "" if it cannot be read (for error messages: a server's log).
std::string read_file(const std::string& path);

}  // namespace bench
