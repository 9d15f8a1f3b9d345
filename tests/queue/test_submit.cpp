// The producer at its edges: what a submission writes, keys, bulk, the full policies, bad
// options, payload limits, and a Redis that is down or read-only.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "queue_fixture.hpp"

namespace {

using namespace queue_test;
using spool::queue::errc;
using spool::queue::job_options;
using spool::queue::job_spec;
using spool::queue::job_state;
using spool::queue::producer;
using spool::queue::producer_options;

class Submit : public queue_test_base {};

TEST_F(Submit, AcknowledgedJobIsQueuedWithItsFields) {
  producer p(url());
  job_options o;
  o.key = "order-1";
  o.attempts = 3;
  o.priority = spool::priority::high;
  const spool::queue::submitted s = p.submit("mail", "send", "payload bytes", o);
  EXPECT_EQ(s.id, "mail/1");
  EXPECT_FALSE(s.existing);
  EXPECT_FALSE(s.ran_here);
  EXPECT_TRUE(s.result.valid());
  const spool::queue::job_status st = status(s.id);
  EXPECT_EQ(st.state, job_state::queued);
  EXPECT_EQ(st.task, "send");
  EXPECT_EQ(st.key, "order-1");
  EXPECT_EQ(st.attempts, 3u);
  EXPECT_EQ(st.attempt, 0u);
  EXPECT_EQ(st.priority, spool::priority::high);
  EXPECT_EQ(st.payload_size, 13u);
  EXPECT_GT(st.created_ms, 0);
  const spool::queue::queue_stats q = stats("mail");
  EXPECT_EQ(q.queued, 1u);
  EXPECT_EQ(q.submitted, 1u);
  EXPECT_EQ(spool::queue::admin(url()).queues(), std::vector<std::string>{"mail"});
}

TEST_F(Submit, EmptyAndBinaryPayloadsAreKeptExactly) {
  producer p(url());
  const std::string binary("\0\x01\xff\n\r zero", 10);
  const auto a = p.submit("q", "t", "");
  const auto b = p.submit("q", "t", binary);
  EXPECT_EQ(status(a.id).payload_size, 0u);
  redis_client r = raw();
  const auto reply = r.command({"HGET", "spool:{q}:job:2", "payload"});
  EXPECT_EQ(text(*reply), binary);
}

TEST_F(Submit, SecondSubmissionWithTheKeyReturnsTheFirstJob) {
  producer p(url());
  job_options o;
  o.key = "k";
  const auto first = p.submit("q", "t", "one", o);
  const auto second = p.submit("q", "t", "two", o);
  EXPECT_EQ(second.id, first.id);
  EXPECT_TRUE(second.existing);
  EXPECT_EQ(stats("q").submitted, 1u);
  // A key in another queue is another key.
  EXPECT_EQ(p.submit("other", "t", "", o).id, "other/1");
  // Once the job is done, the key still finds it, with its result at once.
  spool::queue::worker w(url(), fast_worker("q", 1));
  w.handle("t", [](const spool::queue::job_context&, std::string_view payload) {
    return "ran " + std::string(payload);
  });
  w.start();
  auto done = p.submit("q", "t", "three", o);
  EXPECT_EQ(done.result.get(), "ran one");
  auto after = p.submit("q", "t", "four", o);
  EXPECT_TRUE(after.existing);
  ASSERT_TRUE(after.result.ready());
  EXPECT_EQ(after.result.get(), "ran one");
}

TEST_F(Submit, BulkSubmitsEveryJobInOneCall) {
  producer p(url());
  std::vector<job_spec> jobs;
  for (int i = 0; i < 100; ++i) jobs.push_back({"t", std::to_string(i), {}});
  jobs[7].options.key = "seven";
  const auto out = p.submit_bulk("q", jobs);
  ASSERT_EQ(out.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(out[i].id, "q/" + std::to_string(i + 1));
  EXPECT_EQ(stats("q").queued, 100u);
  EXPECT_TRUE(p.submit_bulk("q", std::vector<job_spec>{}).empty());
  // One bad job refuses the whole batch before anything is sent.
  jobs.push_back({"bad task", "", {}});
  EXPECT_EQ(error_of([&] { p.submit_bulk("q", jobs); }), errc::invalid_argument);
  EXPECT_EQ(stats("q").submitted, 100u);
}

TEST_F(Submit, OptionsOutOfRangeAreRefusedByName) {
  producer p(url());
  const auto refused = [&](job_options o) {
    return message_of([&] { p.submit("q", "t", "", o); });
  };
  job_options o;
  o.attempts = 0;
  EXPECT_NE(refused(o).find("attempts = 0"), std::string::npos);
  o.attempts = 1001;
  EXPECT_NE(refused(o).find("attempts = 1001"), std::string::npos);
  o = {};
  o.delay = -1ms;
  EXPECT_NE(refused(o).find("delay"), std::string::npos);
  o = {};
  o.time_limit = std::chrono::days(31);
  EXPECT_NE(refused(o).find("time_limit"), std::string::npos);
  o = {};
  o.takeovers = 1001;
  EXPECT_NE(refused(o).find("takeovers"), std::string::npos);
  o = {};
  o.result_ttl = -1s;
  EXPECT_NE(refused(o).find("result_ttl"), std::string::npos);
  o = {};
  o.key = std::string(513, 'k');
  EXPECT_NE(refused(o).find("513 bytes"), std::string::npos);
  o = {};
  o.priority = static_cast<spool::priority>(7);
  EXPECT_NE(refused(o).find("priority"), std::string::npos);
  EXPECT_EQ(stats("q").submitted, 0u);
  // The extremes that are allowed.
  o = {};
  o.attempts = 1000;
  o.takeovers = 0;
  o.key = std::string(512, 'k');
  o.time_limit = std::chrono::days(30);
  o.result_ttl = 0s;
  o.delay = 0ms;
  EXPECT_EQ(error_of([&] { p.submit("q", "t", "", o); }), errc{});
}

TEST_F(Submit, BadQueueOrTaskNamesAreRefused) {
  producer p(url());
  EXPECT_EQ(error_of([&] { p.submit("my queue", "t"); }), errc::invalid_argument);
  EXPECT_EQ(error_of([&] { p.submit("q", ""); }), errc::invalid_argument);
  EXPECT_EQ(error_of([&] { p.submit("", "t"); }), errc::invalid_argument);
  EXPECT_TRUE(spool::queue::admin(url()).queues().empty());
}

TEST_F(Submit, PayloadAboveTheLimitIsRefused) {
  producer_options o;
  o.max_payload = 16;
  producer p(url(), o);
  EXPECT_EQ(error_of([&] { p.submit("q", "t", std::string(16, 'x')); }), errc{});
  EXPECT_EQ(error_of([&] { p.submit("q", "t", std::string(17, 'x')); }), errc::too_large);
  EXPECT_EQ(stats("q").submitted, 1u);
  producer_options zero;
  zero.max_payload = 0;
  EXPECT_EQ(error_of([&] { producer bad(url(), zero); }), errc::invalid_argument);
  producer_options huge;
  huge.max_payload = std::size_t{1} << 40;
  EXPECT_EQ(error_of([&] { producer bad(url(), huge); }), errc::invalid_argument);
}

TEST_F(Submit, DelayedJobWaitsInItsOwnSetUntilDue) {
  producer p(url());
  job_options o;
  o.delay = 400ms;
  const auto s = p.submit("q", "t", "", o);
  const auto st = status(s.id);
  EXPECT_EQ(st.state, job_state::delayed);
  EXPECT_GE(st.due_ms, st.created_ms + 400);
  EXPECT_EQ(stats("q").delayed, 1u);
  EXPECT_EQ(stats("q").queued, 0u);
  // A due time already past means now.
  job_options past;
  past.due = std::chrono::system_clock::now() - 1h;
  EXPECT_EQ(status(p.submit("q", "t", "", past).id).state, job_state::queued);
  // Run: it does not start before its due time (Redis's clock says so).
  spool::queue::worker w(url(), fast_worker("q", 1));
  w.handle("t", [](const spool::queue::job_context&, std::string_view) { return std::string(); });
  w.start();
  ASSERT_TRUE(eventually([&] { return status(s.id).state == job_state::done; }));
  EXPECT_GE(status(s.id).started_ms, st.due_ms);
}

TEST_F(Submit, FullQueueRejectsOrTimesOut) {
  spool::queue::admin(url()).set_max_length("q", 2);
  producer_options o;
  o.on_full = spool::full_policy::reject;
  producer p(url(), o);
  p.submit("q", "t");
  job_options later;
  later.delay = 1h;  // delayed jobs count towards the length too
  p.submit("q", "t", "", later);
  EXPECT_EQ(error_of([&] { p.submit("q", "t"); }), errc::full);
  EXPECT_EQ(stats("q").submitted, 2u);
  // A job already submitted under a key is found, full or not.
  job_options keyed;
  keyed.key = "k";
  spool::queue::admin(url()).set_max_length("q", 3);
  p.submit("q", "t", "", keyed);
  EXPECT_TRUE(p.submit("q", "t", "", keyed).existing);

  producer_options timed;
  timed.on_full = spool::full_policy::block_for;
  timed.block_timeout = 50ms;
  producer t(url(), timed);
  EXPECT_EQ(error_of([&] { t.submit("q", "t"); }), errc::timed_out);

  // Bulk: the refused jobs' futures carry the refusal; the others are submitted.
  spool::queue::admin(url()).set_max_length("q", 4);
  std::vector<job_spec> jobs(3, job_spec{"t", "", {}});
  auto out = p.submit_bulk("q", jobs);
  EXPECT_EQ(out[0].id, "q/4");
  EXPECT_TRUE(out[1].id.empty());
  EXPECT_EQ(error_of([&] { out[1].result.get(); }), errc::full);
  EXPECT_EQ(error_of([&] { out[2].result.get(); }), errc::full);
  // 0: no bound.
  spool::queue::admin(url()).set_max_length("q", 0);
  EXPECT_EQ(error_of([&] { p.submit("q", "t"); }), errc{});
}

TEST_F(Submit, FullQueueRunsInTheCallerWithItsHandler) {
  spool::queue::admin(url()).set_max_length("q", 1);
  producer_options o;
  o.on_full = spool::full_policy::caller_runs;
  producer p(url(), o);
  p.handle("t", [](const spool::queue::job_context& job, std::string_view payload) {
    return "here " + std::string(payload) + " " + std::to_string(job.attempt);
  });
  EXPECT_FALSE(p.submit("q", "t", "a").ran_here);
  auto here = p.submit("q", "t", "b");
  EXPECT_TRUE(here.ran_here);
  EXPECT_TRUE(here.id.empty());
  EXPECT_EQ(here.result.get(), "here b 1");
  auto unknown = p.submit("q", "other", "c");
  EXPECT_EQ(error_of([&] { unknown.result.get(); }), errc::full);
  // handle() after the first submission is out of order.
  EXPECT_EQ(error_of([&] {
              p.handle("late", [](const spool::queue::job_context&, std::string_view) {
                return std::string();
              });
            }),
            errc::wrong_order);
}

TEST_F(Submit, FullQueueBlocksUntilAWorkerMakesRoom) {
  spool::queue::admin(url()).set_max_length("q", 1);
  producer p(url());  // block, the default
  p.submit("q", "t", "first");
  std::atomic<bool> submitted{false};
  std::thread blocked([&] {
    p.submit("q", "t", "second");
    submitted = true;
  });
  EXPECT_EQ(stats("q").submitted, 1u);
  spool::queue::worker w(url(), fast_worker("q", 1));
  w.handle("t", [](const spool::queue::job_context&, std::string_view) { return std::string(); });
  w.start();
  blocked.join();
  EXPECT_TRUE(submitted);
  EXPECT_EQ(stats("q").submitted, 2u);
}

TEST_F(Submit, DiscardOldestIsNotAProducerPolicy) {
  producer_options o;
  o.on_full = spool::full_policy::discard_oldest;
  EXPECT_EQ(error_of([&] { producer p(url(), o); }), errc::invalid_argument);
}

TEST_F(Submit, RedisDownIsUnavailableAndRecoveryNeedsNoNewProducer) {
  producer p(url());
  p.submit("q", "t");
  server().stop();
  EXPECT_EQ(error_of([&] { p.submit("q", "t"); }), errc::unavailable);
  EXPECT_NE(message_of([&] { p.submit("q", "t"); }).find(url()), std::string::npos);
  server().start();  // no persistence: an empty Redis, functions loaded again on connect
  EXPECT_EQ(p.submit("q", "t").id, "q/1");
}

TEST_F(Submit, AnotherBuildsFunctionsAreRefusedAndKept) {
  redis_client r = raw();
  load_another_build(r, "0123456789abcdef");
  producer p(url());
  EXPECT_EQ(error_of([&] { p.submit("q", "t"); }), errc::other_version);
  const std::string why = message_of([&] { p.submit("q", "t"); });
  EXPECT_NE(why.find("another spool build (version 0123456789abcdef"), std::string::npos) << why;
  EXPECT_NE(why.find("--replace-functions"), std::string::npos) << why;
  // Nothing was replaced and nothing submitted.
  EXPECT_EQ(text(*r.command({"FCALL_RO", "spool_version", "0"})), "0123456789abcdef");
  EXPECT_EQ(r.command({"EXISTS", "spool:{q}:seq"})->integer, 0);
  EXPECT_EQ(error_of([&] { spool::queue::admin(url()).stats("q"); }), errc::other_version);
}

TEST_F(Submit, ALibraryWithoutAVersionIsAnotherBuilds) {
  redis_client r = raw();
  load_another_build(r, "");
  producer p(url());
  EXPECT_EQ(error_of([&] { p.submit("q", "t"); }), errc::other_version);
  const std::string why = message_of([&] { p.submit("q", "t"); });
  EXPECT_NE(why.find("(version (unknown: "), std::string::npos) << why;
  EXPECT_EQ(text(*r.command({"FCALL", "spool_other", "0"})), "1");
}

TEST_F(Submit, ReplaceFunctionsLoadsThisBuildsOverAnothers) {
  redis_client r = raw();
  load_another_build(r, "0123456789abcdef");
  producer_options o;
  o.connection.replace_functions = true;
  producer replacing(url(), o);
  EXPECT_EQ(replacing.submit("q", "t").id, "q/1");
  EXPECT_NE(text(*r.command({"FCALL_RO", "spool_version", "0"})), "0123456789abcdef");
  // The functions are this build's now: a connection without the option takes them.
  producer plain(url());
  EXPECT_EQ(plain.submit("q", "t").id, "q/2");
  EXPECT_EQ(status("q/2").state, job_state::queued);
}

TEST_F(Submit, FunctionsAreLoadedWhereRedisHasNone) {
  producer first(url());
  EXPECT_EQ(first.submit("q", "t").id, "q/1");
  redis_client r = raw();
  ASSERT_EQ(text(*r.command({"FUNCTION", "FLUSH"})), "OK");
  producer second(url());  // a new connection finds no library and loads this build's
  EXPECT_EQ(second.submit("q", "t").id, "q/2");
  EXPECT_EQ(r.command({"FUNCTION", "LIST"})->elements, 1u);
}

TEST_F(Submit, NothingListeningIsUnavailable) {
  producer p("redis://127.0.0.1:1");
  EXPECT_EQ(error_of([&] { p.submit("q", "t"); }), errc::unavailable);
}

TEST_F(Submit, ReadOnlyReplicaIsRefused) {
  // A replica of a primary that does not exist: it answers, read-only.
  redis_server replica(spoold_test::find_redis_server(),
                       {"--replicaof", "127.0.0.1", std::to_string(server().port())});
  producer p(replica.spec());
  const std::string why = message_of([&] { p.submit("q", "t"); });
  EXPECT_NE(why.find("read-only replica"), std::string::npos) << why;
  EXPECT_EQ(error_of([&] { p.submit("q", "t"); }), errc::unavailable);
}

TEST_F(Submit, WaitForReplicasThatDoNotExistIsOutcomeUnknown) {
  producer_options o;
  o.replicas = 1;
  o.replica_timeout = 50ms;
  producer p(url(), o);
  job_options keyed;
  keyed.key = "k";
  EXPECT_EQ(error_of([&] { p.submit("q", "t", "", keyed); }), errc::outcome_unknown);
  // It reached the primary: submitting again with the key finds it.
  producer plain(url());
  EXPECT_TRUE(plain.submit("q", "t", "", keyed).existing);
}

TEST_F(Submit, WatchFindsAnyJobAndRefusesUnknownOnes) {
  producer p(url());
  EXPECT_EQ(error_of([&] { p.watch("q/99"); }), errc::not_found);
  EXPECT_EQ(error_of([&] { p.watch("no slash"); }), errc::invalid_argument);
  const auto s = p.submit("q", "t", "x");
  producer other(url());
  auto f = other.watch(s.id);
  spool::queue::worker w(url(), fast_worker("q", 1));
  w.handle("t", [](const spool::queue::job_context&, std::string_view payload) {
    return std::string(payload) + "!";
  });
  w.start();
  EXPECT_EQ(f.get(), "x!");
}

TEST_F(Submit, ProducerDestroyedWhileWaitingCancelsItsFutures) {
  spool::future<std::string> f;
  {
    producer p(url());
    f = std::move(p.submit("q", "t").result);
  }
  EXPECT_THROW(f.get(), spool::task_cancelled);
  EXPECT_EQ(stats("q").queued, 1u);  // the job goes on
}

}  // namespace
