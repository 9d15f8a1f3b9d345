#include "limits/refusals.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <new>
#include <system_error>

#include "event/poll_set.hpp"
#include "thread_name.hpp"

namespace spoold {

refusals::refusals(server_context& ctx, std::size_t capacity)
    : ctx_(ctx), capacity_(capacity), driver_(never_raised_) {}

refusals::~refusals() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  if (thread_pid_ != ::getpid()) return;  // none started here
  wake();
  thread_.join();
  incoming_.clear();  // closes them
}

bool refusals::take(accepted&& a, refusal_reason why) noexcept {
  if (lingering_.fetch_add(1, std::memory_order_relaxed) >= capacity_) {
    lingering_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  std::unique_ptr<connection> c;
  try {
    c = std::make_unique<connection>(ctx_, driver_, std::move(a), steady_clock::now(), refusal,
                                     why);
  } catch (const std::bad_alloc&) {
    lingering_.fetch_sub(1, std::memory_order_relaxed);
    return a.fd < 0;  // the constructor took the socket and closed it
  }
  bool was_empty = false;
  if (!c->closed()) {
    std::lock_guard lock(mu_);
    try {
      if (thread_pid_ != ::getpid()) start_locked();
      was_empty = incoming_.empty();
      incoming_.push_back(std::move(c));
    } catch (const std::exception&) {
      // No thread, or no room to list it: the answer is out, the socket closes now.
    }
  }
  if (c) {
    c.reset();
    lingering_.fetch_sub(1, std::memory_order_relaxed);
  } else if (was_empty) {
    wake();  // one wake-up per batch: a non-empty list means one is already on its way
  }
  return true;
}

// Under mu_. Throws std::system_error if the thread cannot start, or if this process was forked
// from one whose thread had started (that thread is not here, and its state is not ours). The
// eventfd is made here, not before: processes forked before the thread started (the workers of
// preforked) must not share one, or one process's thread could take another's wake-up.
void refusals::start_locked() {
  if (thread_pid_ != 0) throw std::system_error(EPERM, std::generic_category(), "refusals");
  wake_.emplace();
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    wake_.reset();
    throw;
  }
  thread_pid_ = ::getpid();
}

void refusals::wake() const noexcept { wake_->signal(); }

void refusals::run() {
  name_this_thread("spoold-refusals");
  std::vector<std::unique_ptr<connection>> lingering;
  poll_set set;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (done_) break;
      for (auto& c : incoming_) lingering.push_back(std::move(c));
      incoming_.clear();
    }
    auto now = steady_clock::now();
    set.clear();
    const std::size_t wake_index = set.add(wake_->fd(), POLLIN);
    const std::size_t first = set.size();  // lingering[i] is at first + i
    auto wake_at = steady_clock::time_point::max();
    for (const auto& c : lingering) {
      set.add(c->fd(), c->interest());
      wake_at = std::min(wake_at, c->deadline());
    }
    if (!set.wait(wake_at, now)) {
      std::perror("spoold: poll (refusals)");
      break;
    }
    now = steady_clock::now();
    if (set.revents(wake_index) != 0) wake_->drain();
    for (std::size_t i = 0; i < lingering.size(); ++i) {
      connection& c = *lingering[i];
      if (const short revents = set.revents(first + i); revents != 0) c.on_poll(revents, now);
      c.on_deadline(now);
    }
    const std::size_t closed = std::erase_if(lingering, [](const auto& c) { return c->closed(); });
    lingering_.fetch_sub(closed, std::memory_order_relaxed);
  }
  lingering_.fetch_sub(lingering.size(), std::memory_order_relaxed);
  lingering.clear();
}

}  // namespace spoold
