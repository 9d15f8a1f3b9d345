// The queue's Redis functions (functions.lua), as loaded into Redis: the source with its
// version (a hash of the source) filled in. A connection that finds another version loaded
// (or none) loads this one (FUNCTION LOAD REPLACE); one version at a time per Redis.
#pragma once

#include <string>

namespace spool::queue::detail {

struct functions_library {
  std::string code;     // what FUNCTION LOAD REPLACE takes
  std::string version;  // what spool_version returns once it is loaded
};

const functions_library& functions();

}  // namespace spool::queue::detail
