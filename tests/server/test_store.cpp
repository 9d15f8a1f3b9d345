// The guestbook stores against the real thing: SQLite on a temporary file, Redis with a
// redis-server started for each test (redis_fixture.hpp).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redis_fixture.hpp"
#include "store/store.hpp"

namespace {

using spoold::store::added;
using spoold::store::entry;
using spoold::store::open_store;
using spoold::store::page;
using spoold::store::unavailable;

std::vector<std::string> names_of(const page& p) {
  std::vector<std::string> names;
  for (const entry& e : p.entries) names.push_back(e.name);
  return names;
}

// The message of the unavailable a call throws ("" if it throws nothing).
template <class F>
std::string unavailable_message(F&& f) {
  try {
    f();
  } catch (const unavailable& e) {
    return e.what();
  }
  return "";
}

// 8 threads send the same 20 keyed posts at once: each key is stored once, by one of them.
void expect_racing_replays_store_once(spoold::store::store& s) {
  constexpr int threads = 8;
  constexpr int keys = 20;
  std::latch go(threads);
  std::atomic<int> stored{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      go.arrive_and_wait();  // all threads start together, for maximal contention
      for (int i = 0; i < keys; ++i) {
        if (s.add_entry({"n", "k" + std::to_string(i)}, "key-" + std::to_string(i)) ==
            added::stored) {
          stored.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  EXPECT_EQ(stored.load(), keys);
  EXPECT_EQ(s.visit(100).total_entries, static_cast<std::uint64_t>(keys));
}

// ---------------------------------------------------------------------------------------------
// open_store: specs

TEST(StoreSpec, RejectsMalformedSpecsWithInvalidArgument) {
  for (const char* spec :
       {"", "sqlite", "sqlite:", "sqlite::memory:", "mysql://localhost", "redis:", "redis://",
        "redis://:6379", "redis://host:", "redis://host:0", "redis://host:65536",
        "redis://host:12ab", "redis://host:-1", "redis://host/0", "redis://user@host",
        "redis://[::1", "redis://[::1]x", "REDIS://host", "/tmp/guestbook.db"}) {
    EXPECT_THROW(open_store(spec), std::invalid_argument) << "spec: \"" << spec << "\"";
  }
}

TEST(StoreSpec, InvalidArgumentMessageNamesTheSpecAndTheForms) {
  try {
    open_store("mysql://localhost");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("mysql://localhost"), std::string::npos) << what;
    EXPECT_NE(what.find("sqlite:PATH"), std::string::npos) << what;
  }
}

TEST(StoreSpec, SentinelSpecs) {
  // Opening starts the watcher, which finds no Sentinel here and keeps trying until destroyed.
  EXPECT_EQ(open_store("redis-sentinel://127.0.0.1/fleet")->describe(),
            "redis-sentinel://127.0.0.1:26379/fleet");
  EXPECT_EQ(
      open_store("redis-sentinel://127.0.0.5:7001,127.0.0.6,[::1]:7003/my-master.1")->describe(),
      "redis-sentinel://127.0.0.5:7001,127.0.0.6:26379,[::1]:7003/my-master.1");
  for (const char* spec :
       {"redis-sentinel://", "redis-sentinel://host", "redis-sentinel://host/",
        "redis-sentinel:///fleet", "redis-sentinel://a,,b/fleet", "redis-sentinel://a,/fleet",
        "redis-sentinel://host:0/fleet", "redis-sentinel://host:x/fleet",
        "redis-sentinel://host/fl eet", "redis-sentinel://host/a/b", "redis-sentinel://u@h/m"}) {
    EXPECT_THROW(open_store(spec), std::invalid_argument) << "spec: \"" << spec << "\"";
  }
}

TEST(StoreSpec, ReplicasOnlyForRedis) {
  spoold::store::store_options replicated;
  replicated.replicas = 1;
  try {
    open_store("sqlite:/nonexistent/never-created.db", replicated);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("replicas"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(open_store("redis://127.0.0.1:7000", replicated));
}

TEST(StoreSpec, RedisOpensWithoutAServerAndDefaultsThePort) {
  // Opening never connects, so these need no server.
  EXPECT_EQ(open_store("redis://127.0.0.1")->describe(), "redis://127.0.0.1:6379");
  EXPECT_EQ(open_store("redis://localhost:7000")->describe(), "redis://localhost:7000");
  EXPECT_EQ(open_store("redis://[::1]:7001")->describe(), "redis://[::1]:7001");
  EXPECT_EQ(open_store("redis://[::1]")->describe(), "redis://[::1]:6379");
}

// ---------------------------------------------------------------------------------------------
// SQLite

class SqliteStore : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "spoold-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << "mkdtemp: " << std::strerror(errno);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  [[nodiscard]] std::string db_path() const { return (dir_ / "guestbook.db").string(); }
  [[nodiscard]] std::string spec() const { return "sqlite:" + db_path(); }

  std::filesystem::path dir_;
};

TEST_F(SqliteStore, RoundTrip) {
  auto s = open_store(spec());
  EXPECT_EQ(s->describe(), spec());

  page first = s->visit(10);
  EXPECT_EQ(first.visitor_count, 1u);
  EXPECT_EQ(first.total_entries, 0u);
  EXPECT_TRUE(first.entries.empty());

  s->add_entry({"Ann", "Hello,\nworld! <b>&amp;</b> \xc3\xa9"});
  s->add_entry({"Bob", "second"});
  const page second = s->visit(10);
  EXPECT_EQ(second.visitor_count, 2u);
  EXPECT_EQ(second.total_entries, 2u);
  ASSERT_EQ(second.entries.size(), 2u);
  EXPECT_EQ(second.entries[0].name, "Ann");
  EXPECT_EQ(second.entries[0].remarks, "Hello,\nworld! <b>&amp;</b> \xc3\xa9");
  EXPECT_EQ(second.entries[1].name, "Bob");
  EXPECT_EQ(second.entries[1].remarks, "second");
}

TEST_F(SqliteStore, VisitReturnsTheLastEntriesOldestFirst) {
  auto s = open_store(spec());
  for (int i = 0; i < 10; ++i) s->add_entry({"n" + std::to_string(i), "r"});

  const page p = s->visit(3);
  EXPECT_EQ(p.total_entries, 10u);
  EXPECT_EQ(names_of(p), (std::vector<std::string>{"n7", "n8", "n9"}));

  const page all = s->visit(100);
  EXPECT_EQ(all.entries.size(), 10u);
  EXPECT_EQ(all.entries.front().name, "n0");
  EXPECT_EQ(all.entries.back().name, "n9");

  const page none = s->visit(0);
  EXPECT_TRUE(none.entries.empty());
  EXPECT_EQ(none.total_entries, 10u);
}

TEST_F(SqliteStore, EveryVisitCountsOnceAndPingDoesNot) {
  auto s = open_store(spec());
  for (std::uint64_t i = 1; i <= 5; ++i) EXPECT_EQ(s->visit(1).visitor_count, i);
  EXPECT_TRUE(s->ping());
  EXPECT_TRUE(s->ping());
  EXPECT_EQ(s->visit(1).visitor_count, 6u);
}

TEST_F(SqliteStore, ConcurrentAddsAndVisitsKeepExactTotals) {
  constexpr int threads = 8;
  constexpr int adds = 40;
  auto s = open_store(spec());
  std::latch go(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      go.arrive_and_wait();  // all threads start together, for maximal contention
      for (int i = 0; i < adds; ++i) {
        s->add_entry({"t" + std::to_string(t), std::to_string(i)});
        const page p = s->visit(5);
        EXPECT_LE(p.entries.size(), 5u);
        EXPECT_GE(p.total_entries, static_cast<std::uint64_t>(i + 1));
      }
    });
  }
  for (std::thread& w : workers) w.join();

  const page p = s->visit(threads * adds);
  EXPECT_EQ(p.visitor_count, static_cast<std::uint64_t>(threads * adds + 1));
  EXPECT_EQ(p.total_entries, static_cast<std::uint64_t>(threads * adds));
  ASSERT_EQ(p.entries.size(), static_cast<std::size_t>(threads * adds));
  // Each thread's entries appear exactly once and in the order it added them.
  std::vector<int> next(threads, 0);
  for (const entry& e : p.entries) {
    const int t = std::stoi(e.name.substr(1));
    ASSERT_GE(t, 0);
    ASSERT_LT(t, threads);
    EXPECT_EQ(e.remarks, std::to_string(next[t])) << "thread " << t;
    ++next[t];
  }
  for (int t = 0; t < threads; ++t) EXPECT_EQ(next[t], adds) << "thread " << t;
}

TEST_F(SqliteStore, EntriesSurviveReopeningTheFile) {
  {
    auto s = open_store(spec());
    s->add_entry({"Ann", "before"});
    s->visit(1);
    // A second instance on the same file sees committed entries while the first is open.
    auto other = open_store(spec());
    EXPECT_EQ(names_of(other->visit(10)), (std::vector<std::string>{"Ann"}));
  }
  auto reopened = open_store(spec());
  reopened->add_entry({"Bob", "after"});
  const page p = reopened->visit(10);
  EXPECT_EQ(p.visitor_count, 3u);
  EXPECT_EQ(p.total_entries, 2u);
  EXPECT_EQ(names_of(p), (std::vector<std::string>{"Ann", "Bob"}));
}

TEST_F(SqliteStore, FileIsInWalMode) {
  auto s = open_store(spec());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db_path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_F(SqliteStore, UncreatableFileThrowsUnavailable) {
  // A path under a regular file cannot be created, even by root (tests may run as root, for
  // whom permission bits do not stop anything).
  const std::filesystem::path file = dir_ / "plain-file";
  std::ofstream(file) << "not a directory";
  const std::string message =
      unavailable_message([&] { open_store("sqlite:" + (file / "guestbook.db").string()); });
  EXPECT_NE(message.find("sqlite"), std::string::npos) << message;
  EXPECT_NE(message.find("guestbook.db"), std::string::npos) << message;
}

TEST_F(SqliteStore, SqliteErrorsAreUnavailableAndTheStoreRecovers) {
  auto s = open_store(spec());
  s->add_entry({"Ann", "one"});
  s->visit(10);  // this thread now has a connection with prepared statements

  // Break the schema behind the store's back, then repair it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "ALTER TABLE entries RENAME TO moved", nullptr, nullptr, nullptr),
            SQLITE_OK);
  const std::string message = unavailable_message([&] { s->visit(10); });
  EXPECT_NE(message.find("no such table"), std::string::npos) << message;
  EXPECT_FALSE(unavailable_message([&] { s->add_entry({"Bob", "two"}); }).empty());
  ASSERT_EQ(sqlite3_exec(db, "ALTER TABLE moved RENAME TO entries", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  s->add_entry({"Cid", "three"});
  const page p = s->visit(10);
  EXPECT_EQ(names_of(p), (std::vector<std::string>{"Ann", "Cid"}));
  EXPECT_EQ(p.total_entries, 2u);  // the failed add_entry counted nothing
}

TEST_F(SqliteStore, PostKeyIsStoredOnce) {
  auto s = open_store(spec());
  EXPECT_EQ(s->add_entry({"Ann", "once"}, "key-1"), added::stored);
  EXPECT_EQ(s->add_entry({"Ann", "once"}, "key-1"), added::replayed);
  // A replay is recognised by its key alone (the key stands for the form that was sent).
  EXPECT_EQ(s->add_entry({"Ann", "edited"}, "key-1"), added::replayed);
  EXPECT_EQ(s->add_entry({"Bob", "other"}, "key-2"), added::stored);
  const page p = s->visit(10);
  EXPECT_EQ(p.total_entries, 2u);
  EXPECT_EQ(names_of(p), (std::vector<std::string>{"Ann", "Bob"}));
  EXPECT_EQ(p.entries[0].remarks, "once");
}

TEST_F(SqliteStore, PostsWithoutAKeyAreStoredEachTime) {
  auto s = open_store(spec());
  EXPECT_EQ(s->add_entry({"Ann", "same"}), added::stored);
  EXPECT_EQ(s->add_entry({"Ann", "same"}), added::stored);
  EXPECT_EQ(s->add_entry({"Ann", "same"}, ""), added::stored);
  EXPECT_EQ(s->visit(10).total_entries, 3u);
}

TEST_F(SqliteStore, ConcurrentReplaysOfOneKeyStoreOneEntry) {
  expect_racing_replays_store_once(*open_store(spec()));
}

TEST_F(SqliteStore, FileFromBeforePostKeysGetsTheColumn) {
  {
    // The schema of a spoold without post keys, with one entry.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "PRAGMA journal_mode=WAL;"
                           "CREATE TABLE entries(id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                           "  remarks TEXT NOT NULL, created INTEGER);"
                           "CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
                           "INSERT INTO entries(name, remarks) VALUES('Old', 'entry');"
                           "INSERT INTO counters VALUES('visitor_count', 5);"
                           "INSERT INTO counters VALUES('entry_count', 1);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto s = open_store(spec());
  EXPECT_EQ(s->add_entry({"New", "keyed"}, "k"), added::stored);
  EXPECT_EQ(s->add_entry({"New", "keyed"}, "k"), added::replayed);
  const page p = s->visit(10);
  EXPECT_EQ(p.visitor_count, 6u);
  EXPECT_EQ(names_of(p), (std::vector<std::string>{"Old", "New"}));
  // Opening it again finds the column there.
  EXPECT_EQ(open_store(spec())->add_entry({"New", "keyed"}, "k"), added::replayed);
}

TEST_F(SqliteStore, CheckSaysWhereTheStoreIs) {
  auto s = open_store(spec());
  const spoold::store::health h = s->check();
  EXPECT_TRUE(h.up);
  EXPECT_EQ(h.detail, spec());
}

TEST_F(SqliteStore, ThreadsMayOutliveTheStoreAndUseANewOne) {
  auto first = open_store(spec());
  std::latch used_first(1);
  std::latch first_destroyed(1);
  std::latch used_second(1);
  std::unique_ptr<spoold::store::store> second;
  std::thread user([&] {
    first->add_entry({"Ann", "from a thread"});
    used_first.count_down();
    first_destroyed.wait();
    second->add_entry({"Bob", "same thread, new store"});
    used_second.count_down();
  });
  used_first.wait();
  first.reset();  // closes the thread's connection while the thread lives on
  second = open_store(spec());
  first_destroyed.count_down();
  used_second.wait();
  user.join();  // the thread exits after the store it used first is gone
  EXPECT_EQ(names_of(second->visit(10)), (std::vector<std::string>{"Ann", "Bob"}));
}

// How many of this process's descriptors are open on `path`.
int descriptors_on(const std::string& path) {
  int n = 0;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(fd.path(), ec) == path) ++n;
  }
  return n;
}

// A thread's SQLite connection outlives the thread: the next thread takes it instead of opening
// the file again, and at most `idle` are kept.
TEST_F(SqliteStore, ExitedThreadsLeaveTheirConnectionsToTheNext) {
  auto s = spoold::store::open_sqlite_store(db_path(), 1);
  auto in_thread = [](auto f) { std::async(std::launch::async, f).get(); };
  in_thread([&] { s->add_entry({"Ann", "first thread"}); });
  const int kept = descriptors_on(db_path());
  EXPECT_GE(kept, 1);  // the exited thread's connection is still open
  for (int t = 0; t < 4; ++t) {
    in_thread([&] { s->add_entry({"Bob", "a later thread"}); });
    EXPECT_EQ(descriptors_on(db_path()), kept) << "thread " << t << " opened the file again";
  }
  EXPECT_EQ(s->visit(10).total_entries, 5u);
}

TEST_F(SqliteStore, WithNoIdleConnectionsEachExitingThreadClosesItsOwn) {
  auto s = spoold::store::open_sqlite_store(db_path(), 0);
  std::async(std::launch::async, [&] { s->add_entry({"Ann", "gone with its thread"}); }).get();
  EXPECT_EQ(descriptors_on(db_path()), 0);
  EXPECT_EQ(s->visit(10).total_entries, 1u);
}

// ---------------------------------------------------------------------------------------------
// Redis

class RedisStore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The store requires it of its process (store.hpp); spoold does the same at startup.
    signal(SIGPIPE, SIG_IGN);
  }
  void SetUp() override {
    const std::string binary = spoold_test::find_redis_server();
    if (binary.empty()) GTEST_SKIP() << "redis-server is not installed";
    server_ = std::make_unique<spoold_test::redis_server>(binary);
  }

  [[nodiscard]] spoold::store::redis_options options() const {
    spoold::store::redis_options o;
    o.port = server_->port();
    return o;
  }

  std::unique_ptr<spoold_test::redis_server> server_;
};

TEST_F(RedisStore, RoundTripUsesZeroHttpdKeys) {
  auto s = open_store(server_->spec());
  EXPECT_EQ(s->describe(), server_->spec());
  s->add_entry({"Ann", "Hello,\nworld!"});
  s->add_entry({"Bob", "second"});
  const page p = s->visit(10);
  EXPECT_EQ(p.visitor_count, 1u);
  EXPECT_EQ(p.total_entries, 2u);
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(p.entries[0].name, "Ann");
  EXPECT_EQ(p.entries[0].remarks, "Hello,\nworld!");
  EXPECT_EQ(p.entries[1].name, "Bob");

  spoold_test::redis_client raw(server_->port());
  auto list = raw.command({"LRANGE", "guestbook_remarks", "0", "-1"});
  ASSERT_EQ(list->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(list->elements, 2u);
  EXPECT_EQ(std::string(list->element[0]->str, list->element[0]->len), "Ann\nHello,\nworld!");
  EXPECT_EQ(std::string(list->element[1]->str, list->element[1]->len), "Bob\nsecond");
  auto count = raw.command({"GET", "visitor_count"});
  ASSERT_EQ(count->type, REDIS_REPLY_STRING);
  EXPECT_STREQ(count->str, "1");
}

TEST_F(RedisStore, ElementWithoutNewlineIsRemarksWithoutName) {
  spoold_test::redis_client raw(server_->port());
  raw.command({"RPUSH", "guestbook_remarks", "written by ZeroHTTPd"});
  raw.command({"SET", "visitor_count", "41"});
  auto s = open_store(server_->spec());
  const page p = s->visit(10);
  EXPECT_EQ(p.visitor_count, 42u);
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].name, "");
  EXPECT_EQ(p.entries[0].remarks, "written by ZeroHTTPd");
}

TEST_F(RedisStore, VisitReturnsTheLastEntriesOldestFirst) {
  auto s = open_store(server_->spec());
  for (int i = 0; i < 10; ++i) s->add_entry({"n" + std::to_string(i), "r"});
  const page p = s->visit(3);
  EXPECT_EQ(p.total_entries, 10u);
  EXPECT_EQ(names_of(p), (std::vector<std::string>{"n7", "n8", "n9"}));
  EXPECT_EQ(s->visit(100).entries.size(), 10u);
  const page none = s->visit(0);  // not "LRANGE -0 -1", which would be the whole list
  EXPECT_TRUE(none.entries.empty());
  EXPECT_EQ(none.total_entries, 10u);
  EXPECT_EQ(none.visitor_count, 3u);
}

TEST_F(RedisStore, ConcurrentAddsAndVisitsKeepExactTotals) {
  constexpr int threads = 8;
  constexpr int adds = 40;
  auto s = open_store(server_->spec());
  std::latch go(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < adds; ++i) {
        s->add_entry({"t" + std::to_string(t), std::to_string(i)});
        const page p = s->visit(5);
        EXPECT_LE(p.entries.size(), 5u);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const page p = s->visit(threads * adds);
  EXPECT_EQ(p.visitor_count, static_cast<std::uint64_t>(threads * adds + 1));
  EXPECT_EQ(p.total_entries, static_cast<std::uint64_t>(threads * adds));
  std::vector<int> next(threads, 0);
  for (const entry& e : p.entries) {
    const int t = std::stoi(e.name.substr(1));
    ASSERT_GE(t, 0);
    ASSERT_LT(t, threads);
    EXPECT_EQ(e.remarks, std::to_string(next[t])) << "thread " << t;
    ++next[t];
  }
  for (int t = 0; t < threads; ++t) EXPECT_EQ(next[t], adds) << "thread " << t;
}

// The number of clients the server sees, polled until it equals `want` or 20 s pass: the server
// notices a closed connection only when it next reads from it.
long connected_clients_eventually(spoold_test::redis_client& raw, long want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  long clients = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    auto info = raw.command({"INFO", "clients"});
    const std::string text(info->str, info->len);
    const std::string key = "connected_clients:";
    const std::size_t at = text.find(key);
    if (at == std::string::npos) return -1;
    clients = std::stol(text.substr(at + key.size()));
    if (clients == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return clients;
}

// Threads that each call visit(1) on the store `visits` times and then stay alive until
// release(), which joins them.
class parked_visitors {
 public:
  parked_visitors(spoold::store::store& s, int threads, int visits) : used_(threads) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, &s, visits] {
        for (int v = 0; v < visits; ++v) s.visit(1);
        used_.count_down();
        finish_.wait();
      });
    }
    used_.wait();
  }
  parked_visitors(const parked_visitors&) = delete;
  parked_visitors& operator=(const parked_visitors&) = delete;
  ~parked_visitors() { release(); }

  void release() {
    if (threads_.empty()) return;
    finish_.count_down();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::latch used_;
  std::latch finish_{1};
  std::vector<std::thread> threads_;
};

// A figure of INFO `section`, -1 if it is missing.
long info_number(spoold_test::redis_client& raw, const std::string& section,
                 const std::string& name) {
  auto info = raw.command({"INFO", section});
  const std::string text(info->str, info->len);
  const std::string key = name + ":";
  const std::size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::stol(text.substr(at + key.size()));
}

// The number of connections the server has accepted so far.
long connections_received(spoold_test::redis_client& raw) {
  return info_number(raw, "stats", "total_connections_received");
}

// Calls borrow a connection and give it back: threads that come later, one at a time, use the
// connections the earlier ones made instead of making their own.
TEST_F(RedisStore, ThreadsShareTheConnectionsOfOneStore) {
  constexpr int threads = 4;
  spoold_test::redis_client raw(server_->port());
  auto s = open_store(server_->spec());
  parked_visitors workers(*s, threads, 2);
  workers.release();
  const long made = connections_received(raw);
  for (int t = 0; t < 8; ++t) std::async(std::launch::async, [&] { s->visit(1); }).get();
  EXPECT_EQ(connections_received(raw), made);
  EXPECT_EQ(s->visit(1).visitor_count, static_cast<std::uint64_t>(2 * threads + 8 + 1));
}

// However many threads call at once, the store holds at most `connections`; the calls beyond
// wait for one, and every call is served.
TEST_F(RedisStore, NoMoreConnectionsThanTheLimitHoweverManyThreads) {
  constexpr int threads = 16;
  constexpr int visits = 25;
  spoold_test::redis_client raw(server_->port());
  const long before = connections_received(raw);
  spoold::store::redis_options o = options();
  o.connections = 2;
  o.connect_timeout = std::chrono::seconds(30);  // a bound on a wait, not a pace
  auto s = spoold::store::open_redis_store(o);
  { parked_visitors workers(*s, threads, visits); }
  EXPECT_LE(connections_received(raw) - before, 2);
  EXPECT_EQ(s->visit(1).visitor_count, static_cast<std::uint64_t>(threads * visits + 1));
}

// A call that finds every connection lent waits for one for connect_timeout, then fails with a
// message that says so; once the connection is back, calls use it again.
// A store of one connection (connect_timeout 200 ms), and a post that holds it in WAIT for a
// replica that does not exist, for up to 3 s; the post then fails with outcome_unknown.
// Declared in this order so that the post ends before the store goes away.
struct one_connection_held {
  std::unique_ptr<spoold::store::store> store;
  std::future<void> post;
};

// Opens h.store with `o` and starts h.post; returns once Redis lists the post in WAIT.
void hold_the_only_connection(spoold::store::redis_options o, int port, one_connection_held& h) {
  o.connections = 1;
  o.connect_timeout = std::chrono::milliseconds(200);
  o.replicas = 1;  // and there is none
  o.replica_timeout = std::chrono::milliseconds(3000);
  h.store = spoold::store::open_redis_store(o);
  h.post = std::async(std::launch::async, [s = h.store.get()] {
    EXPECT_THROW(s->add_entry({"Ann", "waits for a replica"}), spoold::store::outcome_unknown);
  });
  spoold_test::redis_client raw(port);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool waiting = false;
  while (!waiting && std::chrono::steady_clock::now() < deadline) {
    auto list = raw.command({"CLIENT", "LIST"});
    waiting = std::string(list->str, list->len).find("cmd=wait") != std::string::npos;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(waiting) << "the post never reached WAIT";
}

TEST_F(RedisStore, ACallWaitsForABusyConnectionThenFails) {
  one_connection_held h;
  ASSERT_NO_FATAL_FAILURE(hold_the_only_connection(options(), server_->port(), h));
  auto& s = h.store;
  try {
    (void)s->visit(1);
    ADD_FAILURE() << "a visit got a connection that a post holds";
  } catch (const spoold::store::busy& e) {
    EXPECT_NE(std::string(e.what()).find("all 1 connections busy for 200 ms"), std::string::npos)
        << e.what();
  }
  h.post.get();
  EXPECT_EQ(s->visit(1).total_entries, 1u);
}

// The health check has a connection of its own: with the only shared one held, it still
// finds the primary up (and the check makes no second connection of its own on the next call).
TEST_F(RedisStore, ACheckAnswersWhileEveryConnectionIsLent) {
  one_connection_held held;
  ASSERT_NO_FATAL_FAILURE(hold_the_only_connection(options(), server_->port(), held));
  auto& s = held.store;
  spoold_test::redis_client raw(server_->port());
  const long received = connections_received(raw);
  const spoold::store::health h = s->check();
  EXPECT_TRUE(h.up) << h.detail;
  EXPECT_NE(h.detail.find("primary 127.0.0.1:" + std::to_string(server_->port())),
            std::string::npos)
      << h.detail;
  EXPECT_THROW((void)s->visit(1), spoold::store::busy);  // the shared one is still lent
  EXPECT_TRUE(s->check().up);
  EXPECT_EQ(connections_received(raw), received + 1);  // the check's, once
  held.post.get();
}

TEST_F(RedisStore, AtLeastOneConnection) {
  spoold::store::redis_options o = options();
  o.connections = 0;
  EXPECT_THROW(spoold::store::open_redis_store(o), std::invalid_argument);
}

TEST_F(RedisStore, DestroyingTheStoreClosesEveryConnection) {
  constexpr int threads = 4;
  spoold_test::redis_client raw(server_->port());
  auto s = open_store(server_->spec());
  parked_visitors workers(*s, threads, 1);  // alive while the store goes away
  // Each visit was answered on a connection that is still open: the server counts it already.
  EXPECT_GT(info_number(raw, "clients", "connected_clients"), 1);
  s.reset();
  EXPECT_EQ(connected_clients_eventually(raw, 1), 1);
  workers.release();
}

TEST_F(RedisStore, PingTellsUpFromDown) {
  auto s = open_store(server_->spec());
  EXPECT_TRUE(s->ping());
  server_->stop();
  EXPECT_FALSE(s->ping());
}

TEST_F(RedisStore, ServerDownMakesCallsThrowUnavailable) {
  auto s = open_store(server_->spec());
  s->add_entry({"Ann", "before"});
  server_->stop();
  const std::string message = unavailable_message([&] { s->visit(10); });
  EXPECT_NE(message.find(server_->spec()), std::string::npos) << message;
  EXPECT_FALSE(unavailable_message([&] { s->add_entry({"Bob", "during"}); }).empty());
  EXPECT_FALSE(unavailable_message([&] { s->visit(10); }).empty());
}

TEST_F(RedisStore, ServerNeverUpMakesCallsThrowUnavailable) {
  server_->stop();  // nothing listens on the port
  auto s = open_store(server_->spec());
  EXPECT_FALSE(unavailable_message([&] { s->visit(10); }).empty());
  EXPECT_FALSE(s->ping());
}

TEST_F(RedisStore, DuringBackoffCallsFailWithoutConnecting) {
  spoold::store::redis_options o = options();
  o.backoff_initial = std::chrono::hours(1);  // longer than the test: no retry in between
  o.backoff_max = std::chrono::hours(1);
  auto s = spoold::store::open_redis_store(o);
  s->visit(1);
  server_->restart();  // the store's connection is now dead, the server up again
  EXPECT_FALSE(unavailable_message([&] { s->visit(1); }).empty());  // the dead connection
  // The server is up, yet the store does not try it: it is backing off.
  const std::string message = unavailable_message([&] { s->visit(1); });
  EXPECT_NE(message.find("next attempt in"), std::string::npos) << message;
  spoold_test::redis_client raw(server_->port());
  EXPECT_EQ(raw.command({"GET", "visitor_count"})->type, REDIS_REPLY_NIL);  // nothing reached it
  // The health check, on a connection of its own, has no backoff yet: it finds the server up,
  // and like any call that connects it ends the other calls' backoff.
  EXPECT_TRUE(s->ping());
  EXPECT_EQ(s->visit(1).visitor_count, 1u);
}

// One thread finding the server back ends every other thread's backoff: a server that serves
// each connection on another thread must not keep failing requests for backoff_max.
TEST_F(RedisStore, OneThreadsReconnectEndsTheOthersBackoff) {
  spoold::store::redis_options o = options();
  o.backoff_initial = std::chrono::hours(1);  // longer than the test: no retry by the clock
  o.backoff_max = std::chrono::hours(1);
  auto s = spoold::store::open_redis_store(o);
  server_->stop();
  auto in_thread = [](auto f) { std::async(std::launch::async, f).get(); };
  // A thread that called during the outage is backing off for an hour...
  std::promise<void> failed;
  std::promise<void> server_back;
  std::string before, after;
  std::thread backing_off([&] {
    before = unavailable_message([&] { s->visit(1); });
    failed.set_value();
    server_back.get_future().wait();
    after = unavailable_message([&] { s->add_entry({"Bea", "after"}); });
  });
  failed.get_future().wait();
  EXPECT_FALSE(before.empty());
  server_->start();
  // ...until another thread, which had not failed, connects.
  in_thread([&] { s->add_entry({"Al", "first back"}); });
  server_back.set_value();
  backing_off.join();
  EXPECT_EQ(after, "") << "the thread was still backing off";
  EXPECT_EQ(names_of(s->visit(10)), (std::vector<std::string>{"Al", "Bea"}));
}

// After one thread's failure, another thread's connection made before it is not trusted: a
// restarted Redis closed it, and the other thread's next call must not fail on it.
TEST_F(RedisStore, OneThreadsFailureRetiresTheOthersConnections) {
  spoold::store::redis_options o = options();
  o.backoff_initial = std::chrono::hours(1);
  o.backoff_max = std::chrono::hours(1);
  auto s = spoold::store::open_redis_store(o);
  std::promise<void> connected;
  std::promise<void> restarted;
  std::string later;
  std::thread other([&] {
    s->add_entry({"Cy", "before"});  // this thread's connection, to the first server
    connected.set_value();
    restarted.get_future().wait();
    later = unavailable_message([&] { s->add_entry({"Cy", "after"}); });
  });
  connected.get_future().wait();
  s->visit(1);  // this thread's connection, to the first server
  server_->restart();
  EXPECT_FALSE(unavailable_message([&] { s->visit(1); }).empty());  // fails on the dead one
  restarted.set_value();
  other.join();
  EXPECT_EQ(later, "") << "the other thread used its connection from before the restart";
}

TEST_F(RedisStore, CallsSucceedAgainAfterTheServerReturns) {
  auto s = open_store(server_->spec());
  s->add_entry({"Ann", "before"});
  server_->stop();
  EXPECT_FALSE(unavailable_message([&] { s->visit(10); }).empty());
  server_->start();  // same port, empty (no persistence)

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool recovered = false;
  while (!recovered && std::chrono::steady_clock::now() < deadline) {
    try {
      s->add_entry({"Bob", "after"});
      recovered = true;
    } catch (const unavailable&) {
      // Backing off: fails at once. Poll again shortly.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ASSERT_TRUE(recovered) << "the store did not reconnect within 30 s";
  const page p = s->visit(10);
  EXPECT_EQ(names_of(p), (std::vector<std::string>{"Bob"}));
  EXPECT_TRUE(s->ping());
}

TEST_F(RedisStore, StalledServerTimesOutInsteadOfHanging) {
  // A listening socket that never accepts: the kernel completes the handshake, but nothing
  // ever answers, so only the command timeout ends the call.
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 16), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);

  spoold::store::redis_options o;
  o.port = ntohs(addr.sin_port);
  o.command_timeout = std::chrono::milliseconds(200);
  auto s = spoold::store::open_redis_store(o);
  EXPECT_FALSE(unavailable_message([&] { s->visit(10); }).empty());
  EXPECT_FALSE(s->ping());
  close(listener);
}

TEST_F(RedisStore, PostKeyIsStoredOnceWithTheEntry) {
  auto s = open_store(server_->spec());
  EXPECT_EQ(s->add_entry({"Ann", "once"}, "key-1"), added::stored);
  EXPECT_EQ(s->add_entry({"Ann", "once"}, "key-1"), added::replayed);
  EXPECT_EQ(s->add_entry({"Bob", "no key"}), added::stored);
  EXPECT_EQ(s->add_entry({"Bob", "no key"}), added::stored);
  EXPECT_EQ(s->visit(10).total_entries, 3u);

  spoold_test::redis_client raw(server_->port());
  auto keys = raw.command({"HGETALL", "guestbook_post_keys"});
  ASSERT_EQ(keys->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(keys->elements, 2u);  // one field, one value
  EXPECT_EQ(std::string(keys->element[0]->str, keys->element[0]->len), "key-1");
  auto replays = raw.command({"GET", "guestbook_replays"});
  ASSERT_EQ(replays->type, REDIS_REPLY_STRING);
  EXPECT_STREQ(replays->str, "1");
}

TEST_F(RedisStore, ConcurrentReplaysOfOneKeyStoreOneEntry) {
  expect_racing_replays_store_once(*open_store(server_->spec()));
}

// A replica of server_, online once its link to the primary is up.
std::unique_ptr<spoold_test::redis_server> start_replica_of(int primary_port) {
  auto replica = std::make_unique<spoold_test::redis_server>(
      spoold_test::find_redis_server(),
      std::vector<std::string>{"--replicaof", "127.0.0.1 " + std::to_string(primary_port),
                               "--repl-diskless-sync-delay", "0"});
  spoold_test::redis_client raw(replica->port());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    auto info = raw.command({"INFO", "replication"});
    if (std::string(info->str, info->len).find("master_link_status:up") != std::string::npos) {
      return replica;
    }
    // Polling another process until its link is up (not synchronisation between threads).
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "the replica's link to the primary did not come up within 30 s";
  return replica;
}

std::size_t list_length(int port) {
  spoold_test::redis_client raw(port);
  auto n = raw.command({"LLEN", "guestbook_remarks"});
  return n->type == REDIS_REPLY_INTEGER ? static_cast<std::size_t>(n->integer) : 0;
}

TEST_F(RedisStore, PostIsAcknowledgedOnceTheReplicasHaveIt) {
  auto replica = start_replica_of(server_->port());
  spoold::store::redis_options o = options();
  o.replicas = 1;
  o.replica_timeout = std::chrono::milliseconds(5000);
  auto s = spoold::store::open_redis_store(o);
  EXPECT_EQ(s->add_entry({"Ann", "replicated"}, "k1"), added::stored);
  // WAIT returned: the replica has it already, no polling needed.
  EXPECT_EQ(list_length(replica->port()), 1u);
  // A replay waits for the replicas too, and is acknowledged the same way.
  EXPECT_EQ(s->add_entry({"Ann", "replicated"}, "k1"), added::replayed);
  EXPECT_EQ(list_length(replica->port()), 1u);
}

TEST_F(RedisStore, PostNotReplicatedInTimeHasAnUnknownOutcome) {
  spoold::store::redis_options o = options();
  o.replicas = 1;  // and there is no replica
  o.replica_timeout = std::chrono::milliseconds(100);
  auto s = spoold::store::open_redis_store(o);
  try {
    s->add_entry({"Ann", "alone"}, "k1");
    FAIL() << "no exception";
  } catch (const spoold::store::outcome_unknown& e) {
    EXPECT_NE(std::string(e.what()).find("0 of 1 replicas"), std::string::npos) << e.what();
  }
  // It did reach the primary; sending it again does not store it twice.
  EXPECT_EQ(list_length(server_->port()), 1u);
  EXPECT_THROW(s->add_entry({"Ann", "alone"}, "k1"), spoold::store::outcome_unknown);
  EXPECT_EQ(list_length(server_->port()), 1u);
  // The connection is fine: reads work at once (no backoff).
  EXPECT_EQ(s->visit(10).total_entries, 1u);
}

TEST_F(RedisStore, NothingIsWrittenToAReplica) {
  auto replica = start_replica_of(server_->port());
  auto s = open_store(replica->spec());
  const std::string message = unavailable_message([&] { s->add_entry({"Ann", "x"}, "k"); });
  EXPECT_NE(message.find("READONLY"), std::string::npos) << message;
  EXPECT_FALSE(unavailable_message([&] { s->visit(10); }).empty());  // INCR is a write too
  EXPECT_EQ(list_length(server_->port()), 0u);
  EXPECT_EQ(list_length(replica->port()), 0u);
}

TEST_F(RedisStore, AWriteToADeadConnectionStoredNothing) {
  auto s = open_store(server_->spec());
  s->visit(1);  // the thread has a connection
  server_->stop();
  // The EVAL could not be sent at all: unavailable, but not outcome_unknown.
  try {
    s->add_entry({"Ann", "x"}, "k");
    FAIL() << "no exception";
  } catch (const spoold::store::outcome_unknown& e) {
    FAIL() << "outcome_unknown for a post that was never sent: " << e.what();
  } catch (const unavailable&) {
  }
}

TEST(RedisSentinelStore, NoSentinelAnsweringMeansNoPrimary) {
  signal(SIGPIPE, SIG_IGN);
  const int a = spoold_test::free_loopback_port();
  const int b = spoold_test::free_loopback_port();
  const std::string spec = "redis-sentinel://127.0.0.1:" + std::to_string(a) +
                           ",127.0.0.1:" + std::to_string(b) + "/fleet";
  auto s = open_store(spec);
  try {
    s->visit(10);
    FAIL() << "no exception";
  } catch (const spoold::store::no_primary& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no Redis primary known for 'fleet'"), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(a)), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(b)), std::string::npos) << what;
  }
  // During the backoff that follows, it is still "no primary", without asking again.
  EXPECT_THROW(s->add_entry({"Ann", "x"}, "k"), spoold::store::no_primary);
  const spoold::store::health h = s->check();
  EXPECT_FALSE(h.up);
  EXPECT_NE(h.detail.find("no Redis primary known"), std::string::npos) << h.detail;
}

TEST_F(RedisStore, ErrorRepliesAreUnavailable) {
  spoold_test::redis_client raw(server_->port());
  raw.command({"SET", "guestbook_remarks", "not a list"});
  auto s = open_store(server_->spec());
  const std::string message = unavailable_message([&] { s->visit(10); });
  EXPECT_NE(message.find("WRONGTYPE"), std::string::npos) << message;
}

}  // namespace
