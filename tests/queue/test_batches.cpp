// Calls on batches of jobs at the largest size the functions take (MAX_BATCH, functions.lua):
// the counters a call changes, the outcomes it tells producers and the stream entries of the
// jobs that ended are gathered and written once at the call's end. Each outcome must still
// reach its producer's list once, in the batch's order, each counter must move by exactly what
// happened, and no entry may stay in a stream or a pending list; also when the call fails
// part-way.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "queue/queue_fixture.hpp"
#include "spool/queue/producer.hpp"

namespace {

using namespace queue_test;
using spool::queue::producer;

// The most jobs one call takes (functions.lua's MAX_BATCH).
constexpr int max_batch = 10000;

class Batches : public queue_test_base {};

TEST_F(Batches, OneFinishOfTheLargestBatchTellsEveryOutcomeOnceInOrder) {
  producer p(url());
  p.submit("q", "t", "load");  // loads the functions; claimed and finished with the others
  redis_client r = raw();

  // max_batch - 1 jobs in one submission, over the three priorities, told to the list "R".
  // Every eighth job (from the fourth) fails for good (1 attempt: dead), every eighth (from
  // the sixth) fails once of 2 (retried, so nothing is told); the rest succeed.
  const int n = max_batch - 1;
  std::vector<std::string> submit = {"FCALL", "spool_submit",   "1", "spool:{q}", "q",
                                     "R",     std::to_string(n)};
  for (int i = 0; i < n; ++i) {
    // task payload key prio delay_ms attempts backoff_ms backoff_max_ms limit_ms ttl_s takeovers
    submit.insert(submit.end(), {"t", "p" + std::to_string(i), "", std::to_string(i % 3), "0",
                                 i % 8 == 5 ? "2" : "1", "0", "0", "0", "3600", "3"});
  }
  auto reply = r.command(submit);
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  ASSERT_EQ(reply->elements, static_cast<std::size_t>(n));
  EXPECT_EQ(stats("q").queued, static_cast<std::uint64_t>(n + 1));

  // Claimed in as many calls as it takes (a claim reads one priority at a time).
  struct claimed {
    std::string id;
    std::string payload;
  };
  std::vector<claimed> jobs;
  for (int calls = 0; calls < 10 && jobs.size() < static_cast<std::size_t>(max_batch); ++calls) {
    reply = r.command({"FCALL", "spool_claim", "1", "spool:{q}", "q", "c",
                       std::to_string(max_batch - jobs.size()), "60000", "0", "0"});
    ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
    const redisReply& got = *reply->element[0];
    for (std::size_t k = 0; k < got.elements; ++k) {
      jobs.push_back({text(*got.element[k]->element[0]), text(*got.element[k]->element[3])});
    }
  }
  ASSERT_EQ(jobs.size(), static_cast<std::size_t>(max_batch));
  auto s = stats("q");
  EXPECT_EQ(s.queued, 0u);
  EXPECT_EQ(s.running, static_cast<std::uint64_t>(max_batch));

  // One finish of all of them, in the order claimed (high first).
  std::vector<std::string> finish = {"FCALL", "spool_finish",           "1", "spool:{q}", "q",
                                     "c",     std::to_string(max_batch)};
  std::vector<std::string> told;  // what "R" must hold afterwards, in order
  std::vector<std::string> codes;
  int done = 0;
  int dead = 0;
  int retried = 0;
  for (const auto& [id, payload] : jobs) {
    const std::string number = number_of(id);
    const int i = payload == "load" ? -1 : std::stoi(payload.substr(1));
    if (i >= 0 && i % 8 == 3) {
      finish.insert(finish.end(), {number, "1", "error", "e" + payload, "0.5"});
      told.push_back("X" + id + "\ne" + payload);
      codes.emplace_back("dead");
      ++dead;
    } else if (i >= 0 && i % 8 == 5) {
      finish.insert(finish.end(), {number, "1", "error", "e" + payload, "0.5"});
      codes.emplace_back("retry");
      ++retried;
    } else {
      finish.insert(finish.end(), {number, "1", "ok", "r" + payload, "0.5"});
      if (i >= 0) told.push_back("D" + id + "\nr" + payload);
      codes.emplace_back("done");
      ++done;
    }
  }
  reply = r.command(finish);
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  ASSERT_EQ(reply->elements, codes.size());
  for (std::size_t k = 0; k < codes.size(); ++k) {
    ASSERT_EQ(text(*reply->element[k]), codes[k]) << "job " << k;
  }

  reply = r.command({"LRANGE", "R", "0", "-1"});
  ASSERT_EQ(reply->elements, told.size());
  for (std::size_t k = 0; k < told.size(); ++k) {
    ASSERT_EQ(text(*reply->element[k]), told[k]) << "note " << k;
  }
  EXPECT_GT(r.command({"TTL", "R"})->integer, 0);

  s = stats("q");
  EXPECT_EQ(s.done, static_cast<std::uint64_t>(done));
  EXPECT_EQ(s.died, static_cast<std::uint64_t>(dead));
  EXPECT_EQ(s.dead, static_cast<std::uint64_t>(dead));
  EXPECT_EQ(s.failed, static_cast<std::uint64_t>(dead + retried));
  EXPECT_EQ(s.retried, static_cast<std::uint64_t>(retried));
  EXPECT_EQ(s.delayed, static_cast<std::uint64_t>(retried));
  EXPECT_EQ(s.running, 0u);
  EXPECT_EQ(s.queued, 0u);
  for (const char* level : {"high", "normal", "low"}) {
    const std::string stream = std::string("spool:{q}:") + level;
    EXPECT_EQ(r.command({"XLEN", stream})->integer, 0) << level;
    reply = r.command({"XPENDING", stream, "workers"});
    EXPECT_EQ(reply->element[0]->integer, 0) << level;
  }

  // The same batch again: every job is already over, so nothing is told or counted twice.
  reply = r.command(finish);
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  for (std::size_t k = 0; k < codes.size(); ++k) {
    ASSERT_EQ(text(*reply->element[k]), codes[k] == "retry" ? "stale" : "dup") << "job " << k;
  }
  EXPECT_EQ(r.command({"LLEN", "R"})->integer, static_cast<long long>(told.size()));
  EXPECT_EQ(stats("q").done, static_cast<std::uint64_t>(done));
}

// A call that fails part-way (a job's hash overwritten with a string by another client, so its
// HMGET is refused) keeps what it did before the failure, and what goes with it: the counters,
// the note to the producer and the dropped entry of the job it finished.
TEST_F(Batches, AFinishThatFailsPartWayWritesWhatItGatheredBeforeTheFailure) {
  producer p(url());
  p.submit("q", "t", "load");  // loads the functions
  redis_client r = raw();
  std::vector<std::string> submit = {"FCALL", "spool_submit", "1", "spool:{q}", "q", "R", "2"};
  for (const char* payload : {"a", "b"}) {
    submit.insert(submit.end(), {"t", payload, "", "1", "0", "1", "0", "0", "0", "3600", "3"});
  }
  ASSERT_EQ(r.command(submit)->type, REDIS_REPLY_ARRAY);
  auto reply =
      r.command({"FCALL", "spool_claim", "1", "spool:{q}", "q", "c", "3", "60000", "0", "0"});
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  ASSERT_EQ(reply->element[0]->elements, 3u);
  std::vector<std::string> ids;
  for (std::size_t k = 0; k < 3; ++k)
    ids.push_back(text(*reply->element[0]->element[k]->element[0]));
  ASSERT_EQ(r.command({"SET", "spool:{q}:job:" + number_of(ids[2]), "not a hash"})->type,
            REDIS_REPLY_STATUS);

  reply = r.command({"FCALL",
                     "spool_finish",
                     "1",
                     "spool:{q}",
                     "q",
                     "c",
                     "3",
                     number_of(ids[0]),
                     "1",
                     "ok",
                     "r0",
                     "0.5",
                     number_of(ids[1]),
                     "1",
                     "ok",
                     "r1",
                     "0.5",
                     number_of(ids[2]),
                     "1",
                     "ok",
                     "r2",
                     "0.5"});
  ASSERT_EQ(reply->type, REDIS_REPLY_ERROR);
  EXPECT_NE(text(*reply).find("WRONGTYPE"), std::string::npos) << text(*reply);

  // The first two were finished before the failure: counted, told, and their entries dropped.
  const auto s = stats("q");
  EXPECT_EQ(s.done, 2u);
  EXPECT_EQ(status(ids[0]).state, spool::queue::job_state::done);
  EXPECT_EQ(status(ids[1]).state, spool::queue::job_state::done);
  reply = r.command({"LRANGE", "R", "0", "-1"});  // "load" went to the producer's own list
  ASSERT_EQ(reply->elements, 1u);
  EXPECT_EQ(text(*reply->element[0]), "D" + ids[1] + "\nr1");
  reply = r.command({"XPENDING", "spool:{q}:normal", "workers"});
  EXPECT_EQ(reply->element[0]->integer, 1);  // the third job's entry only
  EXPECT_EQ(r.command({"XLEN", "spool:{q}:normal"})->integer, 1);
}

TEST_F(Batches, OneSubmissionStopsAtTheMaximumLength) {
  producer p(url());
  p.submit("q", "t", "load");  // loads the functions; 1 job queued
  redis_client r = raw();
  auto reply = r.command({"FCALL", "spool_control", "1", "spool:{q}", "q", "max", "5"});
  ASSERT_EQ(text(*reply), "ok");

  std::vector<std::string> submit = {"FCALL", "spool_submit", "1", "spool:{q}", "q", "", "8"};
  for (int i = 0; i < 8; ++i) {
    submit.insert(submit.end(), {"t", "p", "", "1", "0", "1", "0", "0", "0", "3600", "3"});
  }
  reply = r.command(submit);
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  ASSERT_EQ(reply->elements, 8u);
  for (std::size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(text(*reply->element[k]->element[1]), k < 4 ? "new" : "full") << "job " << k;
  }
  EXPECT_EQ(stats("q").queued, 5u);
}

}  // namespace
