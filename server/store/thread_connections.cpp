#include "store/thread_connections.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spoold::store {

// Owns the connections of one store, keyed by the thread that uses each.
class connection_registry {
 public:
  void add(const void* thread_key, std::unique_ptr<thread_connection> c) {
    std::lock_guard lock(mu_);
    by_thread_.emplace(thread_key, std::move(c));
  }
  // The caller closes what it gets back, outside the lock.
  std::unique_ptr<thread_connection> remove(const void* thread_key) {
    std::lock_guard lock(mu_);
    auto it = by_thread_.find(thread_key);
    if (it == by_thread_.end()) return nullptr;
    std::unique_ptr<thread_connection> c = std::move(it->second);
    by_thread_.erase(it);
    return c;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const void*, std::unique_ptr<thread_connection>> by_thread_;
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
      if (std::shared_ptr<connection_registry> r = e.owner.lock()) r->remove(this).reset();
    }
  }
};

thread_local local_list this_thread_connections;

}  // namespace

thread_connections::thread_connections()
    : id_(next_store_id.fetch_add(1, std::memory_order_relaxed)),
      registry_(std::make_shared<connection_registry>()) {}

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

void thread_connections::discard() noexcept {
  local_list& local = this_thread_connections;
  std::erase_if(local.entries, [this](const local_entry& e) { return e.store_id == id_; });
  registry_->remove(&local).reset();
}

}  // namespace spoold::store
