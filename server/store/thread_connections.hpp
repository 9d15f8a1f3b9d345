// An object per calling thread, owned by the store that made it: the SQLite store's connection,
// the Redis store's slot (its backoff; its connections are lent per call, redis_store.cpp).
//
// Neither libsqlite3 nor hiredis lets two threads share a connection without a lock around
// every call, so the SQLite store keeps one per thread. The store owns them, so destroying the
// store closes them all, whichever threads opened them.
//
// Idle connections. A thread that exits hands its connection back to the store, which keeps up
// to `idle_limit` of them and closes the rest; a thread without one takes an idle one before it
// opens a new one. A server that starts a thread per client connection (the threaded model)
// would otherwise open a database connection, and prepare its statements, for every client;
// keeping at most `idle_limit` bounds what a pool that shrank leaves open. Invariants:
//  - a connection is used by one thread at a time: a thread owns it from take to exit, and
//    the registry's mutex orders the hand-over (so the next owner sees every write of the
//    last one);
//  - a connection is handed only to a thread of the process that made it: a process forked
//    while connections were idle would otherwise share their descriptors with its parent;
//  - discard() (after an error) closes the connection instead of keeping it.
#pragma once

#include <cstddef>
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
  // Keeps up to `idle_limit` connections of exited threads open for other threads.
  explicit thread_connections(std::size_t idle_limit);
  ~thread_connections();  // closes every thread's connection and every idle one
  thread_connections(const thread_connections&) = delete;
  thread_connections& operator=(const thread_connections&) = delete;

  // The calling thread's connection, or nullptr if it has none yet.
  [[nodiscard]] thread_connection* find() const noexcept;
  // Makes `c` the calling thread's connection (it must have none) and returns it.
  thread_connection& adopt(std::unique_ptr<thread_connection> c);
  // Makes an idle connection the calling thread's (it must have none) and returns it, or
  // nullptr when none is idle.
  thread_connection* adopt_idle();
  // Closes the calling thread's connection, if any; its next local() makes a new one.
  void discard() noexcept;

  // find(), or an idle connection, or adopt(make()) when there is neither; `make` may throw.
  template <class Connection, class Make>
  Connection& local(Make&& make) {
    thread_connection* c = find();
    if (c == nullptr) c = adopt_idle();
    if (c == nullptr) c = &adopt(make());
    return static_cast<Connection&>(*c);
  }

 private:
  std::uint64_t id_;
  std::shared_ptr<connection_registry> registry_;
};

}  // namespace spoold::store
