// The queue's Redis functions (functions.lua), as loaded into Redis: the source with its
// version (a hash of the source) filled in. A connection that finds none loaded loads this
// one; it replaces another build's only when its options say so (redis_link.cpp). One version
// at a time per Redis.
#pragma once

#include <string>

namespace spool::queue::detail {

struct functions_library {
  std::string code;     // what FUNCTION LOAD takes
  std::string version;  // what spool_version returns once it is loaded
};

const functions_library& functions();

}  // namespace spool::queue::detail
