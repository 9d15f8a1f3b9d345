// A connection per calling thread, owned by the store that made it.
//
// Both stores keep one database connection per thread (neither libsqlite3 nor hiredis lets two
// threads share one without a lock around every call). The store owns the connections, so
// destroying the store closes them all, whichever threads opened them; a thread that exits
// closes its own, so a pool that grows and shrinks does not pile up idle connections.
//
// Lifetimes: each thread has a small thread_local list of (store id, weak reference to the
// store's registry, connection pointer). A store's id is never reused, so a lookup can never
// find a connection of a destroyed store that happened to live at the same address. At thread
// exit the list hands each connection back to its registry if the registry is still alive
// (the weak reference decides, under the registry's mutex); a dead registry has already
// closed it.
//
// Hazard: destroying a store while another thread is inside one of its calls is a bug, as for
// any object; this class does not make it safe.
#pragma once

#include <cstdint>
#include <memory>

namespace spoold::store {

// What a store keeps per thread; destroying it closes the connection.
class thread_connection {
 public:
  virtual ~thread_connection() = default;
};

class connection_registry;  // thread_connections.cpp

class thread_connections {
 public:
  thread_connections();
  ~thread_connections();  // closes every thread's connection
  thread_connections(const thread_connections&) = delete;
  thread_connections& operator=(const thread_connections&) = delete;

  // The calling thread's connection, or nullptr if it has none yet.
  [[nodiscard]] thread_connection* find() const noexcept;
  // Makes `c` the calling thread's connection (it must have none) and returns it.
  thread_connection& adopt(std::unique_ptr<thread_connection> c);
  // Closes the calling thread's connection, if any; its next local() makes a new one.
  void discard() noexcept;

  // find(), or adopt(make()) when there is none; `make` may throw.
  template <class Connection, class Make>
  Connection& local(Make&& make) {
    thread_connection* c = find();
    if (c == nullptr) c = &adopt(make());
    return static_cast<Connection&>(*c);
  }

 private:
  std::uint64_t id_;
  std::shared_ptr<connection_registry> registry_;
};

}  // namespace spoold::store
