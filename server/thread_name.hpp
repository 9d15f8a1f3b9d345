// Names the calling thread (cut to the 15 characters Linux keeps), for top and debuggers.
#pragma once

#include <pthread.h>

#include <string>

namespace spoold {

inline void name_this_thread(const std::string& name) noexcept {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace spoold
