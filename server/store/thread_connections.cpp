#include "store/thread_connections.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spoold::store {

// Owns the connections of one store: those in use, keyed by the thread that uses each, and the
// idle ones (thread_connections.hpp).
class connection_registry {
 public:
  explicit connection_registry(std::size_t idle_limit)
      : idle_limit_(idle_limit), pid_(::getpid()) {}

  void add(const void* thread_key, std::unique_ptr<thread_connection> c) {
    std::lock_guard lock(mu_);
    by_thread_.emplace(thread_key, std::move(c));
  }
  // The caller closes what it gets back, outside the lock.
  std::unique_ptr<thread_connection> remove(const void* thread_key) {
    std::lock_guard lock(mu_);
    return take_locked(thread_key);
  }
  // The thread of `thread_key` exits: keeps its connection idle if it may, else returns it for
  // the caller to close outside the lock.
  std::unique_ptr<thread_connection> retire(const void* thread_key) noexcept {
    const bool keep = ::getpid() == pid_;
    std::lock_guard lock(mu_);
    std::unique_ptr<thread_connection> c = take_locked(thread_key);
    if (c && keep && idle_.size() < idle_limit_) {
      try {
        idle_.push_back(std::move(c));
      } catch (const std::bad_alloc&) {  // `c` is left as it was: closed instead
      }
    }
    return c;
  }
  // Moves an idle connection to `thread_key` and returns it; nullptr when none is idle.
  thread_connection* take_idle(const void* thread_key) {
    if (::getpid() != pid_) return nullptr;
    std::lock_guard lock(mu_);
    if (idle_.empty()) return nullptr;
    // The entry first: if making it throws, nothing has moved and the connection stays idle.
    std::unique_ptr<thread_connection>& entry = by_thread_.try_emplace(thread_key).first->second;
    entry = std::move(idle_.back());
    idle_.pop_back();
    return entry.get();
  }

 private:
  const std::size_t idle_limit_;
  const pid_t pid_;  // the process whose threads may take idle connections
  std::mutex mu_;
  std::unordered_map<const void*, std::unique_ptr<thread_connection>> by_thread_;
  std::vector<std::unique_ptr<thread_connection>> idle_;

  std::unique_ptr<thread_connection> take_locked(const void* thread_key) {
    auto it = by_thread_.find(thread_key);
    if (it == by_thread_.end()) return nullptr;
    std::unique_ptr<thread_connection> c = std::move(it->second);
    by_thread_.erase(it);
    return c;
  }
};

namespace {

std::atomic<std::uint64_t> next_store_id{1};

struct local_entry {
  std::uint64_t store_id;
  std::weak_ptr<connection_registry> owner;
  thread_connection* connection;  // owned by `owner`; valid while it lives
};

// The calling thread's connections. Its address is the thread's key in every registry.
struct local_list {
  std::vector<local_entry> entries;

  local_list() = default;
  local_list(const local_list&) = delete;
  local_list& operator=(const local_list&) = delete;
  ~local_list() {
    for (local_entry& e : entries) {
      if (std::shared_ptr<connection_registry> r = e.owner.lock()) r->retire(this).reset();
    }
  }
};

thread_local local_list this_thread_connections;

}  // namespace

thread_connections::thread_connections(std::size_t idle_limit)
    : id_(next_store_id.fetch_add(1, std::memory_order_relaxed)),
      registry_(std::make_shared<connection_registry>(idle_limit)) {}

thread_connections::~thread_connections() = default;

thread_connection* thread_connections::find() const noexcept {
  for (const local_entry& e : this_thread_connections.entries) {
    if (e.store_id == id_) return e.connection;
  }
  return nullptr;
}

thread_connection& thread_connections::adopt(std::unique_ptr<thread_connection> c) {
  local_list& local = this_thread_connections;
  // Forget connections of stores destroyed since (they closed them already).
  std::erase_if(local.entries, [](const local_entry& e) { return e.owner.expired(); });
  thread_connection& ref = *c;
  local.entries.reserve(local.entries.size() + 1);  // so push_back below cannot throw
  registry_->add(&local, std::move(c));
  local.entries.push_back(local_entry{id_, registry_, &ref});
  return ref;
}

thread_connection* thread_connections::adopt_idle() {
  local_list& local = this_thread_connections;
  std::erase_if(local.entries, [](const local_entry& e) { return e.owner.expired(); });
  local.entries.reserve(local.entries.size() + 1);  // so push_back below cannot throw
  thread_connection* c = registry_->take_idle(&local);
  if (c != nullptr) local.entries.push_back(local_entry{id_, registry_, c});
  return c;
}

void thread_connections::discard() noexcept {
  local_list& local = this_thread_connections;
  std::erase_if(local.entries, [this](const local_entry& e) { return e.store_id == id_; });
  registry_->remove(&local).reset();
}

}  // namespace spoold::store
