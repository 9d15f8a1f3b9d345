// Jobs that a submission starts for an idle worker and puts in its inbox (functions.lua:
// assign, and the listing in spool_claim; the dispatcher's inbox): who is listed and for how
// many jobs (one, or several of a bulk submission), what an inbox entry carries, the order of
// jobs kept, a paused queue, a listing that lapsed, an inbox item that no longer holds (deleted
// by a cancel or a takeover, or skipped by the worker), and the inbox given back by reconcile and
// by a stop.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "queue/queue_fixture.hpp"
#include "spool/queue/admin.hpp"
#include "spool/queue/producer.hpp"
#include "spool/queue/worker.hpp"

namespace {

using namespace queue_test;
using spool::queue::job_context;
using spool::queue::job_state;
using spool::queue::producer;
using spool::queue::worker;

class Direct : public queue_test_base {
 protected:
  // spool_claim by hand for `consumer`, listed for `listed_ms`; returns the reply.
  auto claim(redis_client& r, const std::string& consumer, const std::string& room,
             const std::string& listed_ms = "60000", const std::string& inbox_read = "0-0") {
    return r.command({"FCALL", "spool_claim", "1", "spool:{q}", "q", consumer, room, "60000", "0",
                      "0", listed_ms, inbox_read});
  }
  static long long tokens(redis_client& r) {
    return r.command({"LLEN", "spool:{q}:ready"})->integer;
  }
  // The inbox's entries, each as its fields and values in their order.
  static std::vector<std::vector<std::string>> fields(redis_client& r,
                                                      const std::string& consumer) {
    const auto reply = r.command({"XRANGE", "spool:{q}:inbox:" + consumer, "-", "+"});
    std::vector<std::vector<std::string>> out;
    for (std::size_t i = 0; i < reply->elements; ++i) {
      const redisReply& f = *reply->element[i]->element[1];
      std::vector<std::string> entry;
      for (std::size_t k = 0; k < f.elements; ++k) entry.push_back(text(*f.element[k]));
      out.push_back(std::move(entry));
    }
    return out;
  }
  // The inbox's entries: "NUMBER ATTEMPT" for a job (its fields `job` and `attempt`), "wake"
  // for a wake-up token (field `wake`).
  static std::vector<std::string> entries(redis_client& r, const std::string& consumer) {
    std::vector<std::string> out;
    for (const std::vector<std::string>& f : fields(r, consumer)) {
      out.push_back(f.size() >= 4 && f[0] == "job" && f[2] == "attempt" ? f[1] + " " + f[3]
                    : !f.empty() && f[0] == "wake"                      ? "wake"
                                                                        : "?");
    }
    return out;
  }
  static std::vector<std::string> ids(redis_client& r, const std::string& consumer) {
    const auto reply = r.command({"XRANGE", "spool:{q}:inbox:" + consumer, "-", "+"});
    std::vector<std::string> out;
    for (std::size_t i = 0; i < reply->elements; ++i) {
      out.push_back(text(*reply->element[i]->element[0]));
    }
    return out;
  }
  static std::string job_field(redis_client& r, const std::string& id, const char* field) {
    return text(*r.command({"HGET", "spool:{q}:job:" + number_of(id), field}));
  }
  // The jobs of the inbox ("NUMBER ATTEMPT"), wake-up tokens left out.
  static std::vector<std::string> inbox(redis_client& r, const std::string& consumer) {
    std::vector<std::string> out;
    for (std::string& e : entries(r, consumer)) {
      if (e != "wake") out.push_back(std::move(e));
    }
    return out;
  }
  static long long wakes(redis_client& r, const std::string& consumer) {
    long long n = 0;
    for (const std::string& e : entries(r, consumer)) n += e == "wake" ? 1 : 0;
    return n;
  }
  // A worker named "w" whose first claim is its last (its check interval and lease are far
  // longer than a test): it starts what it is given, and claims only after a token or the
  // last job its listing allowed.
  static spool::queue::worker_options named_worker(unsigned threads) {
    auto options = fast_worker("q", threads);
    options.name = "w";
    options.check_interval = std::chrono::minutes(10);
    options.lease = std::chrono::minutes(20);
    return options;
  }
  static std::string listed(redis_client& r, const std::string& consumer) {
    return text(*r.command({"ZSCORE", "spool:{q}:idle", consumer}));
  }
  // Lists "ghost" idle with `room`, after a first job (which loads the functions) that it
  // claims and keeps.
  void list_ghost(producer& p, redis_client& r, const std::string& room) {
    p.submit("q", "t", "load");
    claim(r, "ghost", "1");
    claim(r, "ghost", room);
    EXPECT_EQ(listed(r, "ghost"), room);
  }
};

TEST_F(Direct, IdleConsumerIsGivenAsManyJobsAsItsRoom) {
  producer p(url());
  p.submit("q", "t", "first");  // loads the functions; taken by the claim below
  redis_client r = raw();
  auto reply = claim(r, "ghost", "3");
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  ASSERT_EQ(reply->elements, 5u);
  EXPECT_EQ(reply->element[0]->elements, 1u);
  EXPECT_EQ(reply->element[3]->integer, 1);  // idle
  EXPECT_EQ(reply->element[4]->integer, 2);  // listed with the room it has left
  EXPECT_EQ(listed(r, "ghost"), "2");

  // The next two submissions start for it, with no wake-up token; the third waits in its
  // stream, since the listing is used up.
  auto a = p.submit("q", "t", "a");
  auto b = p.submit("q", "t", "b");
  EXPECT_EQ(listed(r, "ghost"), "");
  auto c = p.submit("q", "t", "c");
  EXPECT_EQ(inbox(r, "ghost"),
            (std::vector<std::string>{number_of(a.id) + " 1", number_of(b.id) + " 1"}));
  EXPECT_EQ(tokens(r), 1);
  for (const auto* s : {&a, &b}) {
    const auto st = status(s->id);
    EXPECT_EQ(st.state, job_state::running);
    EXPECT_EQ(st.owner, "ghost");
    EXPECT_EQ(st.attempt, 1u);
  }
  EXPECT_EQ(status(c.id).state, job_state::queued);
  auto s = stats("q");
  EXPECT_EQ(s.running, 3u);
  EXPECT_EQ(s.queued, 1u);

  // The next claim takes the inbox's jobs first, then the stream's; unlisted, inbox emptied.
  reply = claim(r, "ghost", "10", "0");
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  const redisReply& jobs = *reply->element[0];
  ASSERT_EQ(jobs.elements, 3u);
  EXPECT_EQ(text(*jobs.element[0]->element[0]), a.id);
  EXPECT_EQ(text(*jobs.element[0]->element[1]), "1");
  EXPECT_EQ(text(*jobs.element[0]->element[3]), "a");
  EXPECT_EQ(text(*jobs.element[1]->element[0]), b.id);
  EXPECT_EQ(text(*jobs.element[2]->element[0]), c.id);
  EXPECT_EQ(reply->element[4]->integer, 0);  // not asked to be listed
  EXPECT_TRUE(inbox(r, "ghost").empty());
  EXPECT_EQ(listed(r, "ghost"), "");
  EXPECT_EQ(status(c.id).attempt, 1u);
}

// A job given to a listed worker carries what the worker needs to run it, unless its payload is
// longer than 4096 bytes; its hash keeps the entry's id, for a cancel or a takeover to delete.
TEST_F(Direct, GivenJobCarriesItsFieldsUnlessItsPayloadIsLong) {
  producer p(url());
  redis_client r = raw();
  list_ghost(p, r, "4");
  spool::queue::job_options o;
  o.key = "k1";
  o.priority = spool::priority::high;
  o.time_limit = std::chrono::milliseconds(2500);
  auto a = p.submit("q", "t", "a", o);
  const std::string at_limit(4096, 'x');
  const std::string above_limit(4097, 'y');
  auto b = p.submit("q", "t", at_limit);
  auto c = p.submit("q", "t", above_limit);
  auto d = p.submit("q", "t", "");
  const auto f = fields(r, "ghost");
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0], (std::vector<std::string>{
                      "job", number_of(a.id), "attempt", "1", "task", "t", "key", "k1", "limit",
                      "2500", "entry", job_field(r, a.id, "entry"), "level", "2", "payload", "a"}));
  ASSERT_EQ(f[1].size(), 16u);
  EXPECT_EQ(f[1][15], at_limit);
  EXPECT_EQ(f[2], (std::vector<std::string>{"job", number_of(c.id), "attempt", "1"}));
  ASSERT_EQ(f[3].size(), 16u);
  EXPECT_EQ(f[3][7], "");   // no key
  EXPECT_EQ(f[3][9], "0");  // no limit
  EXPECT_EQ(f[3][13], "1");
  EXPECT_EQ(f[3][15], "");
  const auto entry_ids = ids(r, "ghost");
  EXPECT_EQ(job_field(r, a.id, "inbox"), entry_ids[0]);
  EXPECT_EQ(job_field(r, b.id, "inbox"), entry_ids[1]);
  EXPECT_EQ(job_field(r, c.id, "inbox"), entry_ids[2]);
  EXPECT_EQ(job_field(r, d.id, "inbox"), entry_ids[3]);
}

// A job that a submission finds waiting in the stream on its way to its own entry (only
// possible when the queued count says none waits, as forged here) is given too, with its fields.
TEST_F(Direct, AJobReadOnTheWayIsGivenWithItsFields) {
  producer p(url());
  spool::queue::admin a(url());
  redis_client r = raw();
  list_ghost(p, r, "3");
  a.pause("q");
  auto early = p.submit("q", "t", "early");
  a.resume("q");
  r.command({"HSET", "spool:{q}:stats", "queued", "0"});
  auto later = p.submit("q", "t", "later");
  EXPECT_EQ(inbox(r, "ghost"),
            (std::vector<std::string>{number_of(early.id) + " 1", number_of(later.id) + " 1"}));
  std::vector<std::vector<std::string>> jobs;
  for (auto& f : fields(r, "ghost")) {
    if (f[0] == "job") jobs.push_back(std::move(f));
  }
  ASSERT_EQ(jobs.size(), 2u);
  ASSERT_EQ(jobs[0].size(), 16u);
  EXPECT_EQ(jobs[0][15], "early");
  EXPECT_EQ(jobs[0][11], job_field(r, early.id, "entry"));
  const auto entry_ids = ids(r, "ghost");
  EXPECT_NE(std::find(entry_ids.begin(), entry_ids.end(), job_field(r, early.id, "inbox")),
            entry_ids.end());
  EXPECT_EQ(status(early.id).owner, "ghost");
}

TEST_F(Direct, TheConsumerWithTheMostRoomIsGivenTheJob) {
  producer p(url());
  p.submit("q", "t", "load");
  redis_client r = raw();
  claim(r, "small", "1");  // takes "load": nothing left, not listed
  EXPECT_EQ(listed(r, "small"), "");
  claim(r, "small", "1");
  claim(r, "large", "4");
  EXPECT_EQ(listed(r, "small"), "1");
  EXPECT_EQ(listed(r, "large"), "4");
  auto s = p.submit("q", "t", "x");
  EXPECT_EQ(status(s.id).owner, "large");
  EXPECT_EQ(listed(r, "large"), "3");
  EXPECT_EQ(listed(r, "small"), "1");
}

// The optional arguments of a claim are refused when malformed, not taken for their defaults.
TEST_F(Direct, AClaimWithAMalformedListingTimeIsRefused) {
  producer p(url());
  auto load = p.submit("q", "t", "load");  // loads the functions
  redis_client r = raw();
  for (const char* bad : {"-1", "x", "", "1.5"}) {
    const auto reply = claim(r, "ghost", "3", bad);
    ASSERT_EQ(reply->type, REDIS_REPLY_ERROR) << bad;
    EXPECT_NE(text(*reply).find("BADARG"), std::string::npos) << text(*reply);
  }
  const auto reply = claim(r, "ghost", "3", "60000", "not-an-id");
  ASSERT_EQ(reply->type, REDIS_REPLY_ERROR);
  EXPECT_NE(text(*reply).find("BADARG"), std::string::npos) << text(*reply);
  EXPECT_EQ(listed(r, "ghost"), "");
  EXPECT_EQ(status(load.id).state, job_state::queued);  // no claim took it
}

TEST_F(Direct, NoJobOvertakesOneThatWaitsInAStream) {
  producer p(url());
  spool::queue::admin a(url());
  redis_client r = raw();
  list_ghost(p, r, "5");
  a.pause("q");
  auto waiting = p.submit("q", "t", "waiting");  // paused: waits in its stream
  a.resume("q");
  auto later = p.submit("q", "t", "later");
  EXPECT_EQ(status(waiting.id).state, job_state::queued);
  EXPECT_EQ(status(later.id).state, job_state::queued);
  EXPECT_TRUE(inbox(r, "ghost").empty());
  EXPECT_EQ(listed(r, "ghost"), "5");
  // A claim takes them in their order; the next submission is given directly again.
  const auto reply = claim(r, "ghost", "5");
  ASSERT_EQ(reply->element[0]->elements, 2u);
  EXPECT_EQ(text(*reply->element[0]->element[0]->element[0]), waiting.id);
  EXPECT_EQ(text(*reply->element[0]->element[1]->element[0]), later.id);
  auto next = p.submit("q", "t", "next");
  EXPECT_EQ(status(next.id).owner, "ghost");
  EXPECT_EQ(inbox(r, "ghost").size(), 1u);
}

// A listed worker reads only its inbox: a job made ready while it is listed (here, in a paused
// queue) sends it a wake-up token there, not to :ready; once its inbox is full of entries or its
// listing lapsed, the token goes to :ready for the unlisted workers.
TEST_F(Direct, WakeUpTokenForAListedWorkerGoesToItsInbox) {
  producer p(url());
  spool::queue::admin a(url());
  redis_client r = raw();
  list_ghost(p, r, "5");
  a.pause("q");
  p.submit("q", "t", "x");
  EXPECT_EQ(wakes(r, "ghost"), 1);
  EXPECT_TRUE(inbox(r, "ghost").empty());
  EXPECT_EQ(tokens(r), 0);
  // An inbox that holds 64 entries (a worker that died while listed) gets no more tokens.
  for (int i = 1; i < 64; ++i) r.command({"XADD", "spool:{q}:inbox:ghost", "*", "wake", "1"});
  p.submit("q", "t", "y");
  EXPECT_EQ(wakes(r, "ghost"), 64);
  EXPECT_EQ(tokens(r), 1);
  // Nor does one whose listing lapsed.
  r.command({"HSET", "spool:{q}:idle_until", "ghost", "1"});
  r.command({"XTRIM", "spool:{q}:inbox:ghost", "MAXLEN", "1"});
  p.submit("q", "t", "z");
  EXPECT_EQ(wakes(r, "ghost"), 1);
  EXPECT_EQ(tokens(r), 2);
  // The ghost's next claim deletes its inbox, tokens and all.
  claim(r, "ghost", "5");
  EXPECT_TRUE(entries(r, "ghost").empty());
}

// A claim returns the inbox's jobs after the last entry the worker says it has read (those up
// to it were dispatched from the inbox already), and deletes the inbox.
TEST_F(Direct, ClaimTakesOnlyTheInboxEntriesNotYetRead) {
  producer p(url());
  redis_client r = raw();
  list_ghost(p, r, "3");
  auto a = p.submit("q", "t", "a");
  auto b = p.submit("q", "t", "b");
  const auto ids = r.command({"XRANGE", "spool:{q}:inbox:ghost", "-", "+"});
  ASSERT_EQ(ids->elements, 2u);
  const std::string first = text(*ids->element[0]->element[0]);
  EXPECT_EQ(text(*claim(r, "ghost", "3", "0", "x-1")).rfind("BADARG", 0), 0u);
  const auto reply = claim(r, "ghost", "3", "0", first);
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  ASSERT_EQ(reply->element[0]->elements, 1u);
  EXPECT_EQ(text(*reply->element[0]->element[0]->element[0]), b.id);
  EXPECT_TRUE(entries(r, "ghost").empty());
  EXPECT_EQ(status(a.id).owner, "ghost");  // still its, as the worker read it
}

// A worker that never claims on its own (its check interval is long) still starts a job that
// had to wait in its stream: the token in its inbox wakes it while it is listed, and the one in
// :ready once it is not (a paused queue lists nobody).
TEST_F(Direct, ListedWorkerWakesOnATokenInItsInbox) {
  producer p(url());
  spool::queue::admin a(url());
  auto options = named_worker(1);
  worker w(url(), options);
  w.handle("t", [](const job_context&, std::string_view payload) { return std::string(payload); });
  w.start();
  redis_client r = raw();
  ASSERT_TRUE(eventually([&] { return listed(r, "w") == "1"; }));
  a.pause("q");
  auto s = p.submit("q", "t", "x");
  // Woken by its inbox's token, the worker claims, finds the queue paused and waits unlisted.
  ASSERT_TRUE(eventually([&] { return listed(r, "w").empty() && entries(r, "w").empty(); }));
  a.resume("q");
  ASSERT_TRUE(s.result.wait_for(std::chrono::minutes(1)));
  EXPECT_EQ(s.result.get(), "x");
  EXPECT_EQ(w.counters().given, 0u);
  w.stop();
}

TEST_F(Direct, EntryAheadThatIsNoJobIsBuriedAndTheJobStillGiven) {
  producer p(url());
  redis_client r = raw();
  list_ghost(p, r, "2");
  // Not written by this library: no job waits, so the next submission reads it on its way.
  r.command({"XADD", "spool:{q}:normal", "*", "junk", "1"});
  auto s = p.submit("q", "t", "x");
  EXPECT_EQ(status(s.id).owner, "ghost");
  EXPECT_EQ(inbox(r, "ghost"), (std::vector<std::string>{number_of(s.id) + " 1"}));
  EXPECT_EQ(listed(r, "ghost"), "1");
  EXPECT_EQ(stats("q").dead, 1u);
  EXPECT_EQ(stats("q").queued, 0u);
}

TEST_F(Direct, PausedQueueGivesNothingAndListsNobody) {
  producer p(url());
  spool::queue::admin a(url());
  redis_client r = raw();
  list_ghost(p, r, "2");
  a.pause("q");
  auto s = p.submit("q", "t", "x");
  EXPECT_EQ(status(s.id).state, job_state::queued);
  const auto reply = claim(r, "other", "2");
  EXPECT_EQ(reply->element[2]->integer, 1);  // paused
  EXPECT_EQ(reply->element[4]->integer, 0);  // and so not listed
  EXPECT_EQ(listed(r, "other"), "");
}

TEST_F(Direct, LapsedListingIsDroppedAndTheJobWaitsForAClaim) {
  producer p(url());
  redis_client r = raw();
  list_ghost(p, r, "2");
  // The listing's time is Redis's: set it in the past rather than wait for it.
  r.command({"HSET", "spool:{q}:idle_until", "ghost", "1"});
  auto s = p.submit("q", "t", "x");
  EXPECT_EQ(status(s.id).state, job_state::queued);
  EXPECT_EQ(listed(r, "ghost"), "");
  EXPECT_EQ(tokens(r), 1);
}

TEST_F(Direct, LongLapsedListingIsForgottenWithItsInbox) {
  producer p(url());
  redis_client r = raw();
  list_ghost(p, r, "2");
  auto s = p.submit("q", "t", "x");  // given: in the ghost's inbox
  ASSERT_EQ(inbox(r, "ghost").size(), 1u);
  claim(r, "recent", "1");  // listed, lapsing just now (set below)
  ASSERT_EQ(listed(r, "recent"), "1");
  // Lapse times are Redis's: the ghost's a day ago, long past the forget time (60 s at
  // least), "recent"'s a second ago.
  const auto now = r.command({"TIME"});
  const long long now_ms = std::stoll(text(*now->element[0])) * 1000;
  r.command({"HSET", "spool:{q}:idle_until", "ghost", std::to_string(now_ms - 86400000)});
  r.command({"HSET", "spool:{q}:idle_until", "recent", std::to_string(now_ms - 1000)});
  // Another worker's claim with its check for expired leases forgets the ghost and its inbox
  // (the job stays pending under it, for a takeover), and takes "recent" off :idle only.
  const auto reply =
      r.command({"FCALL", "spool_claim", "1", "spool:{q}", "q", "other", "1", "60000", "1", "0"});
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  EXPECT_EQ(listed(r, "ghost"), "");
  EXPECT_TRUE(inbox(r, "ghost").empty());
  EXPECT_EQ(text(*r.command({"HGET", "spool:{q}:idle_until", "ghost"})), "");
  EXPECT_EQ(listed(r, "recent"), "");
  EXPECT_NE(text(*r.command({"HGET", "spool:{q}:idle_until", "recent"})), "");
  EXPECT_EQ(status(s.id).state, job_state::running);
  EXPECT_EQ(status(s.id).owner, "ghost");
}

TEST_F(Direct, JobGivenToAWorkerThatDiedIsTakenOver) {
  producer p(url());
  redis_client r = raw();
  list_ghost(p, r, "2");  // a worker that lists itself and dies
  auto s = p.submit("q", "t", "x");
  ASSERT_EQ(status(s.id).owner, "ghost");
  worker w(url(), fast_worker("q", 1));  // lease 1.5 s, checks every 100 ms
  w.handle("t", [](const job_context& job, std::string_view payload) {
    return std::string(payload) + "@" + std::to_string(job.attempt);
  });
  w.start();
  EXPECT_EQ(s.result.get(), "x@2");
  const auto st = status(s.id);
  EXPECT_EQ(st.takeovers, 1u);
  EXPECT_EQ(st.outcomes, 1u);
  EXPECT_EQ(w.counters().takeovers, 2u);  // "x", and "load", which the ghost had claimed
  // The takeover deleted the entry the ghost never read: were it to wake, it would not run it.
  EXPECT_TRUE(inbox(r, "ghost").empty());
}

TEST_F(Direct, CancelledJobInTheInboxIsNotHandedOut) {
  producer p(url());
  spool::queue::admin a(url());
  redis_client r = raw();
  list_ghost(p, r, "2");
  auto s = p.submit("q", "t", "x");
  EXPECT_EQ(inbox(r, "ghost").size(), 1u);
  a.cancel(s.id);
  EXPECT_TRUE(inbox(r, "ghost").empty());  // a worker reading it now finds nothing to run
  const auto reply = claim(r, "ghost", "2");
  EXPECT_EQ(reply->element[0]->elements, 0u);
  EXPECT_EQ(status(s.id).state, job_state::cancelled);
  EXPECT_EQ(status(s.id).outcomes, 1u);
}

// The inbox entry a cancel deletes is the job's own: an id left from an inbox deleted since,
// or one that names another job's entry, deletes nothing.
TEST_F(Direct, CancelDeletesOnlyItsOwnInboxEntry) {
  producer p(url());
  spool::queue::admin a(url());
  redis_client r = raw();
  list_ghost(p, r, "3");
  auto first = p.submit("q", "t", "first");
  claim(r, "ghost", "3");  // takes "first" from the inbox, deletes it, lists the ghost again
  EXPECT_EQ(status(first.id).owner, "ghost");
  auto second = p.submit("q", "t", "second");
  auto third = p.submit("q", "t", "third");
  ASSERT_EQ(inbox(r, "ghost").size(), 2u);
  a.cancel(first.id);  // its entry went with the old inbox
  EXPECT_EQ(inbox(r, "ghost").size(), 2u);
  r.command(
      {"HSET", "spool:{q}:job:" + number_of(second.id), "inbox", job_field(r, third.id, "inbox")});
  a.cancel(second.id);  // names the third's entry, which stays
  EXPECT_EQ(inbox(r, "ghost"),
            (std::vector<std::string>{number_of(second.id) + " 1", number_of(third.id) + " 1"}));
  a.cancel(third.id);
  EXPECT_EQ(inbox(r, "ghost"), (std::vector<std::string>{number_of(second.id) + " 1"}));
}

TEST_F(Direct, ReconcileHandsBackTheInboxAndUnlists) {
  producer p(url());
  redis_client r = raw();
  list_ghost(p, r, "2");
  auto s = p.submit("q", "t", "x");
  ASSERT_EQ(status(s.id).state, job_state::running);
  const auto reply = r.command({"FCALL", "spool_reconcile", "1", "spool:{q}", "q", "ghost", "0"});
  EXPECT_EQ(reply->integer, 2) << text(*reply);  // "load", claimed, and "x", given
  EXPECT_TRUE(inbox(r, "ghost").empty());
  EXPECT_EQ(listed(r, "ghost"), "");
  const auto st = status(s.id);
  EXPECT_EQ(st.state, job_state::queued);
  EXPECT_EQ(st.failures, 0u);
  EXPECT_EQ(tokens(r), 2);
}

TEST_F(Direct, WorkerRunsWhatItIsGivenWithoutAClaim) {
  producer p(url());
  std::atomic<int> ran{0};
  auto options = named_worker(2);
  worker w(url(), options);
  w.handle("t", [&](const job_context& job, std::string_view payload) {
    ++ran;
    return std::string(payload) + "@" + std::to_string(job.attempt);
  });
  w.start();
  redis_client r = raw();
  ASSERT_TRUE(eventually([&] { return listed(r, "w") == "2"; }));
  const auto claims = [&] {
    const auto info = r.command({"INFO", "commandstats"});
    const std::string s = text(*info);
    const auto at = s.find("cmdstat_fcall:calls=");
    return at == std::string::npos ? -1 : std::stoll(s.substr(at + 20));
  };
  // Every FCALL since is a submission: the worker claims only when its listing is used up.
  const long long before = claims();
  auto s1 = p.submit("q", "t", "a");
  EXPECT_EQ(s1.result.get(), "a@1");
  EXPECT_EQ(claims(), before + 1 + 1);  // the submission, and the outcome recorded
  EXPECT_EQ(listed(r, "w"), "1");
  // An inbox item that no longer holds (here: a job that is done) is skipped, not run.
  const std::string inbox_w = "spool:{q}:inbox:w";
  r.command({"XADD", inbox_w, "*", "job", number_of(s1.id), "attempt", "1"});
  r.command({"XADD", inbox_w, "*", "garbage", "1"});
  r.command({"XADD", inbox_w, "*", "job", number_of(s1.id), "attempt", "1x"});
  r.command({"XADD", inbox_w, "*", "job", "x" + number_of(s1.id), "attempt", "1"});
  auto s2 = p.submit("q", "t", "b");
  EXPECT_EQ(s2.result.get(), "b@1");
  EXPECT_EQ(ran, 2);
  // A job whose payload its entry does not carry is read from its hash, and runs the same.
  ASSERT_TRUE(eventually([&] { return !listed(r, "w").empty(); }));
  const std::string long_payload(5000, 'z');
  auto s3 = p.submit("q", "t", long_payload);
  EXPECT_EQ(status(s3.id).owner, "w");
  EXPECT_EQ(s3.result.get(), long_payload + "@1");
  EXPECT_EQ(ran, 3);
  // "a" came from the inbox; "b" from the inbox or, had the stale items used up the
  // listing, from a claim.
  EXPECT_GE(w.counters().given, 1u);
  w.stop();
}

TEST_F(Direct, BulkSubmissionGivesAWorkerSeveralJobs) {
  producer p(url());
  std::atomic<int> ran{0};
  auto options = named_worker(1);
  options.prefetch = 3;
  worker w(url(), options);
  w.handle("t", [&](const job_context&, std::string_view payload) {
    ++ran;
    return std::string(payload);
  });
  w.start();
  redis_client r = raw();
  ASSERT_TRUE(eventually([&] { return listed(r, "w") == "4"; }));
  std::vector<spool::queue::job_spec> specs{{"t", "a", {}}, {"t", "b", {}}, {"t", "c", {}}};
  auto jobs = p.submit_bulk("q", specs);
  EXPECT_EQ(listed(r, "w"), "1");
  EXPECT_EQ(jobs[0].result.get(), "a");
  EXPECT_EQ(jobs[1].result.get(), "b");
  EXPECT_EQ(jobs[2].result.get(), "c");
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(w.counters().given, 3u);
  for (const auto& j : jobs) EXPECT_EQ(status(j.id).attempt, 1u);
  w.stop();
}

TEST_F(Direct, StopHandsBackWhatTheInboxHolds) {
  producer p(url());
  auto options = named_worker(1);
  worker w(url(), options);
  w.handle("t", [](const job_context&, std::string_view payload) { return std::string(payload); });
  w.start();
  redis_client r = raw();
  ASSERT_TRUE(eventually([&] { return listed(r, "w") == "1"; }));
  w.stop();
  EXPECT_EQ(listed(r, "w"), "");
  // Listed by hand as if it were still idle: its inbox is handed back when a worker of that
  // name starts (a restart reconciles first).
  claim(r, "w", "1");
  auto s = p.submit("q", "t", "x");
  ASSERT_EQ(status(s.id).owner, "w");
  worker again(url(), options);
  again.handle(
      "t", [](const job_context&, std::string_view payload) { return std::string(payload) + "!"; });
  again.start();
  EXPECT_EQ(s.result.get(), "x!");
  EXPECT_EQ(status(s.id).attempt, 2u);
  again.stop();
}

}  // namespace
