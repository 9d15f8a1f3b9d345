// The guestbook in an SQLite file.
//
// Schema: entries(id INTEGER PRIMARY KEY, name, remarks, created, post_key) and
// counters(name PRIMARY KEY, value) with the rows 'visitor_count' and 'entry_count'.
// entry_count is kept in the same transaction as each insert so that a visit reads the total in
// O(1); count(*) would scan the whole table on every page view. post_key is the form's
// idempotency key (NULL when the post had none) under a unique index: an insert whose key is
// already there does nothing (ON CONFLICT DO NOTHING), so a replayed post is recognised in the
// same transaction that would have stored it. Files made before the column existed get it at
// open.
//
// Durability. The file is in WAL mode, so readers never block the writer and a commit is one
// append to the log. The synchronous level is chosen per transaction:
//   * add_entry commits with synchronous=FULL: the log is fsync'ed before COMMIT returns, so an
//     entry the user was told about survives a power loss or an OS crash.
//   * visit commits with synchronous=NORMAL: in WAL mode that is durable against a crash of the
//     process (the log is in the OS's page cache, and SQLite never leaves the file corrupt), but
//     the last few counter increments may be lost on power loss. An fsync per page view would
//     make every GET /guestbook cost a disk flush, for the sake of a visitor counter.
// A NORMAL commit after a FULL one cannot undo the FULL one: the log's frames carry checksums
// and recovery keeps the synced prefix.
//
// Concurrency: a connection per thread (thread_connections.hpp). Every transaction is BEGIN
// IMMEDIATE, which takes the write lock up front, so two transactions never deadlock upgrading
// a read lock. SQLite allows one writer at a time, so the threads of one process take turns on a
// mutex before they begin: a thread that finds SQLite's lock taken would otherwise sleep in the
// busy handler (1, 2, 5, 10 ms and more between tries), far longer than the transaction it
// waits for, and a server with many threads (threaded, prethreaded, the pool under epoll)
// would spend its time asleep. The busy timeout still covers writers in other processes (the
// forking models, a second spoold on the same file), and makes them wait instead of failing.
#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "store/store.hpp"
#include "store/thread_connections.hpp"

namespace spoold::store {
namespace {

// How long a connection waits for another one's write lock before giving up with "database is
// locked". Transactions here are a few statements long, so this is only reached when something
// is badly wrong (a stuck process holding the lock).
constexpr int busy_timeout_ms = 5000;

constexpr const char* schema_sql =
    "PRAGMA journal_mode=WAL;"
    "CREATE TABLE IF NOT EXISTS entries("
    "  id INTEGER PRIMARY KEY, name TEXT NOT NULL, remarks TEXT NOT NULL, created INTEGER,"
    "  post_key TEXT);"
    "CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO counters VALUES('visitor_count', 0);"
    // A file made by an older spoold (or by hand) may lack the row: count once, here.
    "INSERT OR IGNORE INTO counters SELECT 'entry_count', count(*) FROM entries;";

// Run after schema_sql, once the post_key column exists in every file.
constexpr const char* post_key_index_sql =
    "CREATE UNIQUE INDEX IF NOT EXISTS entries_post_key ON entries(post_key);";

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  throw unavailable("sqlite: " + what + ": " +
                    (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}

struct db_deleter {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
using db_handle = std::unique_ptr<sqlite3, db_deleter>;

struct stmt_deleter {
  void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
};
using stmt_handle = std::unique_ptr<sqlite3_stmt, stmt_deleter>;

db_handle open_db(const std::string& path) {
  sqlite3* raw = nullptr;
  // NOMUTEX: each connection is used by one thread at a time (thread_connections), so
  // SQLite's per-connection mutex would only cost.
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  db_handle db(raw);  // sqlite3_open_v2 allocates a handle even when it fails
  if (rc != SQLITE_OK) fail(db.get(), "cannot open " + path);
  if (sqlite3_busy_timeout(db.get(), busy_timeout_ms) != SQLITE_OK) fail(db.get(), "busy_timeout");
  // Ask for the extended codes so that messages say e.g. SQLITE_IOERR_FSYNC, not SQLITE_IOERR.
  sqlite3_extended_result_codes(db.get(), 1);
  return db;
}

void exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message != nullptr ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    throw unavailable(std::string("sqlite: ") + sql + ": " + text);
  }
}

stmt_handle prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr) != SQLITE_OK) {
    fail(db, std::string("prepare ") + sql);
  }
  return stmt_handle(raw);
}

// A file made before post keys existed has entries without the column: add it (NULL for the
// old rows, which therefore never conflict).
void add_post_key_column(sqlite3* db) {
  stmt_handle has = prepare(db,
                            "SELECT count(*) FROM pragma_table_info('entries') "
                            "WHERE name = 'post_key'");
  if (sqlite3_step(has.get()) != SQLITE_ROW) fail(db, "reading the entries table's columns");
  if (sqlite3_column_int(has.get(), 0) == 0) {
    exec(db, "ALTER TABLE entries ADD COLUMN post_key TEXT");
  }
}

// One thread's connection and its prepared statements.
class connection final : public thread_connection {
 public:
  explicit connection(const std::string& path)
      : db_(open_db(path)),
        begin_(prepare(db_.get(), "BEGIN IMMEDIATE")),
        commit_(prepare(db_.get(), "COMMIT")),
        sync_full_(prepare(db_.get(), "PRAGMA synchronous=FULL")),
        sync_normal_(prepare(db_.get(), "PRAGMA synchronous=NORMAL")),
        insert_(prepare(db_.get(),
                        "INSERT INTO entries(name, remarks, created, post_key) "
                        "VALUES(?1, ?2, CAST(strftime('%s', 'now') AS INTEGER), ?3) "
                        "ON CONFLICT DO NOTHING")),
        count_entry_(
            prepare(db_.get(), "UPDATE counters SET value = value + 1 WHERE name = 'entry_count'")),
        count_visit_(prepare(db_.get(),
                             "UPDATE counters SET value = value + 1 WHERE name = 'visitor_count' "
                             "RETURNING value")),
        read_total_(prepare(db_.get(), "SELECT value FROM counters WHERE name = 'entry_count'")),
        read_latest_(prepare(db_.get(),
                             "SELECT name, remarks FROM (SELECT id, name, remarks FROM entries "
                             "ORDER BY id DESC LIMIT ?1) ORDER BY id ASC")),
        read_visitors_(
            prepare(db_.get(), "SELECT value FROM counters WHERE name = 'visitor_count'")) {}

  // NULL keys never conflict (a unique index holds any number of them), so posts without a
  // key are always stored.
  added add_entry(const entry& e, std::string_view post_key) {
    added result = added::stored;
    run_transaction(sync_full_.get(), [&] {
      bind_text(insert_.get(), 1, e.name);
      bind_text(insert_.get(), 2, e.remarks);
      if (!post_key.empty()) bind_text(insert_.get(), 3, post_key);
      step_done(insert_.get());
      if (sqlite3_changes(db_.get()) == 0) {
        result = added::replayed;
        return;
      }
      step_done(count_entry_.get());
    });
    return result;
  }

  page visit(std::size_t max_entries) {
    page p;
    run_transaction(sync_normal_.get(), [&] {
      p.visitor_count = single_value(count_visit_.get());
      p.total_entries = single_value(read_total_.get());
      sqlite3_stmt* s = read_latest_.get();
      const reset_on_exit reset{s};
      const auto limit = static_cast<sqlite3_int64>(std::min<std::size_t>(max_entries, INT64_MAX));
      if (sqlite3_bind_int64(s, 1, limit) != SQLITE_OK) fail(db_.get(), "bind");
      int rc;
      while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        p.entries.push_back(entry{column_text(s, 0), column_text(s, 1)});
      }
      if (rc != SQLITE_DONE) fail(db_.get(), "read entries");
    });
    return p;
  }

  void read_counter() { single_value(read_visitors_.get()); }

 private:
  struct reset_on_exit {
    sqlite3_stmt* s;
    ~reset_on_exit() { sqlite3_reset(s); }
  };

  // Runs `body` between BEGIN IMMEDIATE and COMMIT at the given synchronous level. On an error
  // the transaction stays open: the store closes this connection, which rolls it back.
  template <class Body>
  void run_transaction(sqlite3_stmt* sync_level, Body&& body) {
    if (sync_level != current_sync_) {
      step_done(sync_level);
      current_sync_ = sync_level;
    }
    step_done(begin_.get());
    body();
    step_done(commit_.get());
  }

  void bind_text(sqlite3_stmt* s, int index, std::string_view text) {
    // SQLITE_STATIC: `text` outlives the step; step_done clears the binding.
    if (sqlite3_bind_text(s, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC) !=
        SQLITE_OK) {
      fail(db_.get(), "bind");
    }
  }

  // Steps a statement that returns no rows (or whose rows are not wanted) and resets it.
  void step_done(sqlite3_stmt* s) {
    const int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) fail(db_.get(), sqlite3_sql(s));
  }

  // Steps a statement that yields one integer and resets it. (An UPDATE ... RETURNING makes
  // its change in the first step.)
  std::uint64_t single_value(sqlite3_stmt* s) {
    const reset_on_exit reset{s};
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) throw unavailable(std::string("sqlite: no row from ") + sqlite3_sql(s));
    if (rc != SQLITE_ROW) fail(db_.get(), sqlite3_sql(s));
    return static_cast<std::uint64_t>(sqlite3_column_int64(s, 0));
  }

  static std::string column_text(sqlite3_stmt* s, int column) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, column));
    const int size = sqlite3_column_bytes(s, column);
    return text != nullptr ? std::string(text, static_cast<std::size_t>(size)) : std::string();
  }

  db_handle db_;  // declared first: destroyed last, after every statement is finalized
  stmt_handle begin_, commit_, sync_full_, sync_normal_;
  stmt_handle insert_, count_entry_, count_visit_, read_total_, read_latest_, read_visitors_;
  sqlite3_stmt* current_sync_ = nullptr;  // the level last set on this connection
};

class sqlite_store final : public store {
 public:
  sqlite_store(std::string path, std::size_t idle_connections)
      : path_(std::move(path)), connections_(idle_connections) {
    // Creates the file and schema once, up front, so that a path that cannot be created fails
    // here (at startup) rather than on the first request.
    db_handle db = open_db(path_);
    exec(db.get(), schema_sql);
    add_post_key_column(db.get());
    exec(db.get(), post_key_index_sql);
    // journal_mode=WAL quietly keeps the old mode where WAL cannot work (e.g. a network file
    // system without shared memory); the durability argument above needs WAL, so say so.
    stmt_handle mode = prepare(db.get(), "PRAGMA journal_mode");
    if (sqlite3_step(mode.get()) != SQLITE_ROW) fail(db.get(), "PRAGMA journal_mode");
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(mode.get(), 0));
    if (text == nullptr || std::string_view(text) != "wal") {
      throw unavailable("sqlite: " + path_ + ": cannot use WAL journal mode (journal_mode is " +
                        (text != nullptr ? text : "unknown") + ")");
    }
  }

  // The turn is taken once the thread has its connection: opening one (a file, the WAL's shared
  // memory, a dozen prepared statements) runs in parallel with other threads' transactions.
  using store::add_entry;

  added add_entry(const entry& e, std::string_view post_key) override {
    return with_connection([&](connection& c) {
      const std::lock_guard turn(writer_);
      return c.add_entry(e, post_key);
    });
  }

  page visit(std::size_t max_entries) override {
    return with_connection([&](connection& c) {
      const std::lock_guard turn(writer_);  // a visit writes too: the visitor count
      return c.visit(max_entries);
    });
  }

  health check() noexcept override {
    try {
      with_connection([](connection& c) { c.read_counter(); });
      return health{true, describe()};
    } catch (const std::exception& e) {
      return health{false, e.what()};
    }
  }

  [[nodiscard]] std::string describe() const override { return "sqlite:" + path_; }

 private:
  // Runs `f` on the calling thread's connection. After any error the connection is closed
  // (which rolls back a transaction it left open) and the next call opens a fresh one: a
  // connection is cheap to open, and one in an unknown state is not worth reasoning about.
  template <class F>
  std::invoke_result_t<F, connection&> with_connection(F&& f) {
    connection& c =
        connections_.local<connection>([this] { return std::make_unique<connection>(path_); });
    try {
      return f(c);
    } catch (...) {
      connections_.discard();
      throw;
    }
  }

  std::string path_;
  std::mutex writer_;  // held for a whole write transaction: one writer of this process at a time
  thread_connections connections_;
};

}  // namespace

std::unique_ptr<store> open_sqlite_store(const std::string& path, std::size_t idle_connections) {
  return std::make_unique<sqlite_store>(path, idle_connections);
}

}  // namespace spoold::store
