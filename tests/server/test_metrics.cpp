// metrics: counts recorded from many threads (run under TSan too), several metrics objects
// side by side, and the Prometheus and JSON renderings.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <future>
#include <latch>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "app/metrics.hpp"

namespace {

using spoold::metrics;

// A small JSON well-formedness check (objects, arrays, strings without escapes beyond \",
// numbers, true/false/null): enough to tell the dashboard's document is valid.
class json_checker {
 public:
  explicit json_checker(std::string_view text) : s_(text) {}
  bool valid() {
    skip();
    if (!value()) return false;
    skip();
    return i_ == s_.size();
  }

 private:
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  bool string() {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    for (++i_; i_ < s_.size(); ++i_) {
      if (s_[i_] == '\\') {
        ++i_;
      } else if (s_[i_] == '"') {
        ++i_;
        return true;
      } else if (static_cast<unsigned char>(s_[i_]) < 0x20) {
        return false;
      }
    }
    return false;
  }
  bool number() {
    std::size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                              s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-')) {
      ++i_;
    }
    return i_ > start && std::isdigit(static_cast<unsigned char>(s_[i_ - 1]));
  }
  bool sequence(char close, bool keyed) {
    ++i_;
    skip();
    if (i_ < s_.size() && s_[i_] == close) {
      ++i_;
      return true;
    }
    while (true) {
      skip();
      if (keyed) {
        if (!string()) return false;
        skip();
        if (i_ >= s_.size() || s_[i_] != ':') return false;
        ++i_;
        skip();
      }
      if (!value()) return false;
      skip();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == close) {
        ++i_;
        return true;
      }
      return false;
    }
  }
  bool value() {
    if (i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{':
        return sequence('}', true);
      case '[':
        return sequence(']', false);
      case '"':
        return string();
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        return number();
    }
  }
  std::string_view s_;
  std::size_t i_ = 0;
};

bool valid_metric_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return false;
  }
  return true;
}

// `name value` or `name{label="value"} value`, the value a plain decimal number.
bool valid_sample(std::string_view line, std::string& name) {
  std::size_t end = line.find_first_of("{ ");
  if (end == std::string_view::npos) return false;
  name = line.substr(0, end);
  if (!valid_metric_name(name)) return false;
  line.remove_prefix(end);
  if (line[0] == '{') {
    std::size_t close = line.find("\"} ");
    std::size_t eq = line.find("=\"");
    if (close == std::string_view::npos || eq == std::string_view::npos || eq > close) {
      return false;
    }
    for (char c : line.substr(1, eq - 1)) {
      if (!std::islower(static_cast<unsigned char>(c)) && c != '_') return false;
    }
    line.remove_prefix(close + 2);
  }
  if (line.size() < 2 || line[0] != ' ') return false;
  std::string_view value = line.substr(1);
  return std::isdigit(static_cast<unsigned char>(value[0])) &&
         std::isdigit(static_cast<unsigned char>(value.back())) &&
         value.find_first_not_of("0123456789.") == std::string_view::npos &&
         value.find('.') == value.rfind('.');
}

spool::stats sample_pool() {
  spool::stats s;
  s.threads_live = 3;
  s.threads_busy = 2;
  s.queued = 7;
  s.submitted = 100;
  s.completed = 90;
  s.failed = 1;
  s.rejected = 4;
  s.stolen = 11;
  s.threads_started = 5;
  s.threads_retired = 2;
  return s;
}

TEST(metrics, CountsFromManyThreads) {
  metrics m;
  constexpr int threads = 4;
  constexpr int per_thread = 20'000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&m, t] {
      for (int i = 0; i < per_thread; ++i) {
        int status = i % 4 == 0 ? 404 : (i % 100 == 1 ? 503 : 200);
        m.record_response(status, 10);
      }
      m.connection_opened();
      if (t % 2 == 0) m.connection_closed();
      m.connection_refused();
      m.store_error();
    });
  }
  // Readers run while writers add: sums must never go backwards.
  std::uint64_t last = 0;
  for (int i = 0; i < 50; ++i) {
    std::uint64_t now = m.snapshot().requests;
    EXPECT_GE(now, last);
    last = now;
  }
  for (std::thread& t : pool) t.join();

  const std::uint64_t total = std::uint64_t{threads} * per_thread;
  const std::uint64_t not_found = std::uint64_t{threads} * (per_thread / 4);
  const std::uint64_t unavailable = std::uint64_t{threads} * (per_thread / 100);
  spoold::metrics_snapshot s = m.snapshot();
  EXPECT_EQ(s.requests, total);
  EXPECT_EQ(s.by_status[4], not_found);
  EXPECT_EQ(s.by_status[5], unavailable);
  EXPECT_EQ(s.by_status[2], total - not_found - unavailable);
  EXPECT_EQ(s.by_status[1], 0u);
  EXPECT_EQ(s.by_status[3], 0u);
  EXPECT_EQ(s.bytes_sent, total * 10);
  EXPECT_EQ(s.connections_accepted, 4u);
  EXPECT_EQ(s.connections_open, 2u);
  EXPECT_EQ(s.connections_refused, 4u);
  EXPECT_EQ(s.store_errors, 4u);
  EXPECT_EQ(m.count_for(404), not_found);
  EXPECT_EQ(m.count_for(503), unavailable);
  EXPECT_EQ(m.count_for(200), total - not_found - unavailable);
  EXPECT_EQ(m.count_for(201), 0u);
  EXPECT_EQ(m.count_for(42), 0u);
}

TEST(metrics, ObjectsAreIndependentAndNewOnesStartAtZero) {
  metrics a;
  metrics b;
  a.record_response(200, 1);
  a.record_response(200, 1);
  b.record_response(404, 5);
  EXPECT_EQ(a.snapshot().requests, 2u);
  EXPECT_EQ(b.snapshot().requests, 1u);
  EXPECT_EQ(b.count_for(404), 1u);
  EXPECT_EQ(a.count_for(404), 0u);
  // Objects built one after another in the same storage must not share this thread's shard.
  for (int i = 0; i < 5; ++i) {
    auto c = std::make_unique<metrics>();
    EXPECT_EQ(c->snapshot().requests, 0u);
    c->record_response(201, 3);
    EXPECT_EQ(c->snapshot().requests, 1u);
  }
}

TEST(metrics, CountsOutliveTheThreadsThatMadeThem) {
  metrics m;
  for (int i = 0; i < 100; ++i) {
    std::thread([&m] {
      m.record_response(200, 2);
      m.connection_opened();
    }).join();
  }
  spoold::metrics_snapshot s = m.snapshot();
  EXPECT_EQ(s.requests, 100u);
  EXPECT_EQ(s.bytes_sent, 200u);
  EXPECT_EQ(s.connections_open, 100u);
}

// Hundreds of threads live at once (a wave of connection threads), then end together: past
// the 64 kept for reuse their shards are folded into one and freed. A reader taking snapshots
// meanwhile sees every count exactly once, never twice, never missing.
TEST(metrics, FoldedShardsKeepEveryCount) {
  constexpr int threads = 300;
  metrics m;
  std::latch recorded(threads);
  std::promise<void> go;
  std::shared_future<void> started = go.get_future().share();
  std::vector<std::thread> wave;
  for (int t = 0; t < threads; ++t) {
    wave.emplace_back([&m, &recorded, started] {
      m.record_response(200, 3);
      m.connection_opened();
      m.connection_closed();
      m.connection_refused();
      m.accept_exhausted();
      m.connection_refused_per_client();
      m.request_rate_limited();
      m.proxy_header_error();
      m.store_error();
      m.post_replayed();
      m.tls_handshake_done(false);
      m.tls_handshake_done(true);
      for (std::size_t i = 0; i < spoold::tls_failure_reasons; ++i) m.tls_handshake_failed(i);
      for (std::size_t i = 0; i < spoold::shed_states; ++i) m.connection_shed(i);
      recorded.count_down();
      started.wait();
    });
  }
  recorded.wait();
  std::atomic<bool> ended{false};
  std::atomic<int> wrong{0};
  std::thread reader([&] {
    do {
      const spoold::metrics_snapshot s = m.snapshot();
      if (s.requests != threads || s.bytes_sent != 3u * threads ||
          s.connections_accepted != threads || s.connections_open != 0) {
        wrong.fetch_add(1);
      }
    } while (!ended.load());
  });
  go.set_value();
  for (std::thread& t : wave) t.join();
  ended = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0);
  const spoold::metrics_snapshot s = m.snapshot();
  const auto n = static_cast<std::uint64_t>(threads);
  EXPECT_EQ(s.requests, n);
  EXPECT_EQ(m.count_for(200), n);
  // Every counter of a folded shard survives the fold.
  EXPECT_EQ(s.connections_refused, n);
  EXPECT_EQ(s.accepts_exhausted, n);
  EXPECT_EQ(s.refused_per_client, n);
  EXPECT_EQ(s.rate_limited, n);
  EXPECT_EQ(s.proxy_header_errors, n);
  EXPECT_EQ(s.store_errors, n);
  EXPECT_EQ(s.post_replays, n);
  EXPECT_EQ(s.tls_handshakes, 2 * n);
  EXPECT_EQ(s.tls_resumed, n);
  for (std::size_t i = 0; i < spoold::tls_failure_reasons; ++i) {
    EXPECT_EQ(s.tls_failures[i], n) << spoold::tls_failure_names[i];
  }
  for (std::size_t i = 0; i < spoold::shed_states; ++i) {
    EXPECT_EQ(s.connections_shed[i], n) << spoold::shed_state_names[i];
  }
}

TEST(metrics, ThreadsMayOutliveTheObject) {
  std::thread later;
  {
    auto m = std::make_unique<metrics>();
    std::promise<void> recorded;
    std::promise<void> release;
    later = std::thread([&m, &recorded, f = release.get_future()]() mutable {
      m->record_response(200, 1);
      recorded.set_value();
      f.wait();  // the object is destroyed meanwhile; this thread's exit must not touch it
    });
    recorded.get_future().wait();
    EXPECT_EQ(m->snapshot().requests, 1u);
    m.reset();
    release.set_value();
  }
  later.join();
}

// The forking models: what children count is seen by the parent and by every other child.
TEST(metrics, SharedAcrossProcessesSumsWhatChildrenCount) {
  metrics m;
  m.share_across_processes();
  m.record_response(200, 10);  // the parent's own count lands in the shared counters too
  constexpr int children = 3;
  for (int i = 0; i < children; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Only async-signal-safe work in the child: relaxed adds on the mapping, then _exit.
      m.connection_opened();
      m.record_response(404, 5);
      m.store_error();
      m.connection_closed();
      m.connection_opened();
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  spoold::metrics_snapshot s = m.snapshot();
  EXPECT_EQ(s.requests, 1u + children);
  EXPECT_EQ(s.by_status[4], static_cast<std::uint64_t>(children));
  EXPECT_EQ(s.bytes_sent, 10u + 5u * children);
  EXPECT_EQ(s.store_errors, static_cast<std::uint64_t>(children));
  EXPECT_EQ(s.connections_accepted, 2u * children);
  EXPECT_EQ(s.connections_open, static_cast<std::uint64_t>(children));
  EXPECT_EQ(m.count_for(404), static_cast<std::uint64_t>(children));
}

TEST(metrics, StatusCodesOutsideTheRangeCountAsRequestsOnly) {
  metrics m;
  m.record_response(99, 0);
  m.record_response(600, 0);
  m.record_response(599, 0);
  spoold::metrics_snapshot s = m.snapshot();
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.by_status[5], 1u);
  EXPECT_EQ(m.count_for(599), 1u);
}

TEST(metrics, PrometheusText) {
  metrics m;
  m.record_response(200, 100);
  m.record_response(200, 50);
  m.record_response(404, 10);
  m.connection_opened();
  m.connection_refused();
  m.accept_exhausted();
  m.accept_exhausted();
  m.connection_refused_per_client();
  m.request_rate_limited();
  m.request_rate_limited();
  m.request_rate_limited();
  m.connection_shed(2);  // head
  m.connection_shed(3);  // idle
  m.connection_shed(3);
  m.connection_shed(spoold::shed_states);  // no such state: not counted
  std::string text = m.prometheus(sample_pool());

  for (const char* expected : {
           "# TYPE spoold_requests_total counter\n",
           "spoold_requests_total{code=\"200\"} 2\n",
           "spoold_requests_total{code=\"404\"} 1\n",
           "spoold_response_bytes_total 160\n",
           "spoold_connections_open 1\n",
           "spoold_connections_accepted_total 1\n",
           "spoold_connections_refused_total 1\n",
           "spoold_accepts_exhausted_total 2\n",
           "spoold_connections_refused_per_client_total 1\n",
           "spoold_requests_rate_limited_total 3\n",
           "spoold_store_errors_total 0\n",
           "# TYPE spoold_connections_shed_total counter\n",
           "spoold_connections_shed_total{state=\"handshake\"} 0\n",
           "spoold_connections_shed_total{state=\"proxy_header\"} 0\n",
           "spoold_connections_shed_total{state=\"head\"} 1\n",
           "spoold_connections_shed_total{state=\"idle\"} 2\n",
           "# TYPE spool_threads_live gauge\n",
           "spool_threads_live 3\n",
           "spool_threads_busy 2\n",
           "spool_queue_depth 7\n",
           "spool_tasks_submitted_total 100\n",
           "spool_tasks_completed_total 90\n",
           "spool_tasks_failed_total 1\n",
           "spool_tasks_rejected_total 4\n",
           "spool_tasks_stolen_total 11\n",
       }) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n--- in ---\n" << text;
  }
  EXPECT_EQ(text.find("code=\"500\""), std::string::npos);

  // Text format 0.0.4: every sample line is `name{labels} value`; every family has one HELP
  // and one TYPE line, before its samples.
  std::set<std::string> helped, typed;
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  ASSERT_EQ(text.back(), '\n');
  while (std::getline(lines, line)) {
    std::string_view rest = line;
    if (rest.substr(0, 7) == "# HELP ") {
      rest.remove_prefix(7);
      std::size_t space = rest.find(' ');
      ASSERT_NE(space, std::string_view::npos) << line;
      std::string name(rest.substr(0, space));
      EXPECT_TRUE(valid_metric_name(name)) << line;
      EXPECT_GT(rest.size(), space + 1) << "empty help: " << line;
      EXPECT_TRUE(helped.insert(name).second) << "two HELP lines: " << line;
    } else if (rest.substr(0, 7) == "# TYPE ") {
      rest.remove_prefix(7);
      std::size_t space = rest.find(' ');
      ASSERT_NE(space, std::string_view::npos) << line;
      std::string name(rest.substr(0, space));
      std::string_view kind = rest.substr(space + 1);
      EXPECT_TRUE(kind == "counter" || kind == "gauge") << line;
      EXPECT_TRUE(typed.insert(name).second) << "two TYPE lines: " << line;
      EXPECT_TRUE(helped.count(name)) << "TYPE before HELP: " << line;
    } else {
      std::string name;
      ASSERT_TRUE(valid_sample(rest, name)) << "not exposition format: '" << line << "'";
      EXPECT_TRUE(typed.count(name)) << "sample without TYPE: " << line;
      ++samples;
    }
  }
  EXPECT_GE(samples, 18);
  std::string name;
  EXPECT_FALSE(valid_sample("spoold_x 1 2", name));  // the checker does check
  EXPECT_FALSE(valid_sample("spoold_x{code=200} 1", name));
  EXPECT_FALSE(valid_sample("9x 1", name));
}

TEST(metrics, NodeNameLabelsEverySample) {
  metrics m;
  m.set_node_name("web-1.a");
  m.record_response(200, 10);
  m.post_replayed();
  m.post_replayed();
  const std::string text = m.prometheus(sample_pool());
  EXPECT_NE(text.find("spoold_requests_total{code=\"200\",node=\"web-1.a\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("spoold_guestbook_replays_total{node=\"web-1.a\"} 2\n"), std::string::npos)
      << text;
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    if (line.starts_with("#")) continue;
    std::string name;
    EXPECT_TRUE(valid_sample(line, name)) << line;
    EXPECT_NE(line.find("node=\"web-1.a\""), std::string::npos) << "no node label: " << line;
    ++samples;
  }
  EXPECT_GE(samples, 18);

  const std::string json = m.json(sample_pool());
  EXPECT_TRUE(json_checker(json).valid()) << json;
  EXPECT_NE(json.find("\"node\":\"web-1.a\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"guestbook_replays\":2"), std::string::npos) << json;
}

TEST(metrics, NoNodeNameNoLabel) {
  metrics m;
  m.record_response(200, 10);
  EXPECT_EQ(m.prometheus(sample_pool()).find("node="), std::string::npos);
  EXPECT_EQ(m.json(sample_pool()).find("\"node\""), std::string::npos);
}

TEST(metrics, JsonForTheDashboard) {
  metrics m;
  m.record_response(200, 100);
  m.record_response(301, 0);
  m.record_response(503, 20);
  m.connection_opened();
  m.connection_opened();
  m.connection_closed();
  std::string json = m.json(sample_pool());
  EXPECT_TRUE(json_checker(json).valid()) << json;
  for (const char* expected : {"\"uptime_s\":",
                               "\"time_ms\":",
                               "\"requests\":3",
                               "\"status\":{\"1xx\":0,\"2xx\":1,\"3xx\":1,\"4xx\":0,\"5xx\":1}",
                               "\"bytes_sent\":120",
                               "\"connections_open\":1",
                               "\"connections_accepted\":2",
                               "\"connections_refused\":0",
                               "\"accepts_exhausted\":0",
                               "\"connections_refused_per_client\":0",
                               "\"requests_rate_limited\":0",
                               "\"store_errors\":0",
                               "\"pool\":{",
                               "\"threads_live\":3",
                               "\"threads_busy\":2",
                               "\"queued\":7",
                               "\"submitted\":100",
                               "\"completed\":90",
                               "\"failed\":1",
                               "\"rejected\":4",
                               "\"stolen\":11",
                               "\"threads_started\":5",
                               "\"threads_retired\":2"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " in " << json;
  }
  EXPECT_FALSE(json_checker("{\"a\":1,}").valid());  // the checker does check
}

}  // namespace
