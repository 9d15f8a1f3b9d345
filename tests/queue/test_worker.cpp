// The worker: handlers and results, failures and retries, time limits, cancellation,
// priorities, no hoarding, stopping, and what Redis does with attempts that no longer hold
// their job (fencing, takeovers).
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <latch>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "queue_fixture.hpp"
#include "spool/coro.hpp"

namespace {

using namespace queue_test;
using spool::queue::errc;
using spool::queue::job_context;
using spool::queue::job_options;
using spool::queue::job_spec;
using spool::queue::job_state;
using spool::queue::producer;
using spool::queue::worker;

// The payloads of the jobs its handler ran, in the order they ran.
class run_log {
 public:
  auto handler() {
    return [this](const job_context&, std::string_view payload) {
      std::lock_guard lock(mu_);
      ran_.emplace_back(payload);
      return std::string();
    };
  }
  std::vector<std::string> ran() {
    std::lock_guard lock(mu_);
    return ran_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> ran_;
};

class Worker : public queue_test_base {
 protected:
  // Resumes the paused queue "q" with one worker (levels aged by `aging`, 0: strict) and waits
  // for every job; returns the payloads in the order the worker ran them.
  std::vector<std::string> resume_and_run(spool::queue::admin& a,
                                          std::vector<spool::queue::submitted>& jobs,
                                          std::chrono::milliseconds aging) {
    run_log log;
    auto options = fast_worker("q", 1);
    options.aging = aging;
    worker w(url(), options);
    w.handle("t", log.handler());
    w.start();
    a.resume("q");
    for (auto& j : jobs) j.result.get();
    return log.ran();
  }

  // An attempt claimed by hand, as a worker that then goes silent ("ghost") would hold it.
  struct claimed {
    std::string number;
    std::string attempt;
  };
  claimed ghost_claim(const std::string& queue, const std::string& consumer = "ghost",
                      const std::string& lease_ms = "60000", const std::string& takeovers = "0") {
    redis_client r = raw();
    const auto reply = r.command({"FCALL", "spool_claim", "1", "spool:{" + queue + "}", queue,
                                  consumer, "1", lease_ms, takeovers, "0"});
    EXPECT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
    const redisReply& jobs = *reply->element[0];
    EXPECT_EQ(jobs.elements, 1u);
    const std::string id = text(*jobs.element[0]->element[0]);
    return {number_of(id), text(*jobs.element[0]->element[1])};
  }
  std::string ghost_finish(const std::string& queue, const claimed& c, const std::string& result,
                           const std::string& consumer = "ghost") {
    redis_client r = raw();
    const auto reply = r.command({"FCALL", "spool_finish", "1", "spool:{" + queue + "}", queue,
                                  consumer, "1", c.number, c.attempt, "ok", result, "0"});
    return reply->type == REDIS_REPLY_ARRAY ? text(*reply->element[0]) : "error: " + text(*reply);
  }
};

std::string echo(const job_context&, std::string_view payload) { return std::string(payload); }

// A gate handlers wait at until the test opens it (or their token fires).
class gate {
 public:
  void open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Waits for open() or the token; true if opened.
  bool wait(const spool::cancellation_token& token) {
    std::unique_lock lock(mu_);
    while (!open_) {
      if (token.cancelled()) return false;
      cv_.wait_for(lock, 5ms);  // the token is polled: nothing notifies when it fires
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST_F(Worker, RunsHandlersAndDeliversResults) {
  worker w(url(), fast_worker("q", 2));
  w.handle("echo", echo);
  w.handle("upper", [](const job_context&, std::string_view p) {
    std::string s(p);
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  });
  w.start();
  producer p(url());
  std::vector<spool::queue::submitted> jobs;
  for (int i = 0; i < 50; ++i)
    jobs.push_back(p.submit("q", i % 2 ? "echo" : "upper", "job" + std::to_string(i)));
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(jobs[i].result.get(), i % 2 ? "job" + std::to_string(i) : "JOB" + std::to_string(i));
  }
  // then() and co_await, as with any spool future.
  auto chained =
      p.submit("q", "echo", "21").result.then([](std::string s) { return std::stoi(s) * 2; });
  EXPECT_EQ(chained.get(), 42);
  spool::pool pool(spool::config{});
  auto co = [&]() -> spool::task<std::string> {
    // Bound to a variable first: g++ 12 destroys the temporaries of a default argument (the
    // job_options) twice inside a co_await expression.
    spool::queue::submitted s = p.submit("q", "echo", "awaited");
    co_return co_await std::move(s.result);
  };
  EXPECT_EQ(spool::start(pool, co()).get(), "awaited");
  EXPECT_TRUE(eventually([&] { return stats("q").done == 52; }));
  const auto c = w.counters();
  EXPECT_EQ(c.started, 52u);
  EXPECT_EQ(c.done, 52u);
  EXPECT_EQ(c.handler_time_count, 52u);
  EXPECT_EQ(stats("q").running, 0u);
}

TEST_F(Worker, WaitsOutAnotherBuildsFunctionsUntilThisBuildsAreLoaded) {
  // Another build's library under the queue's name: the worker refuses to replace it, says
  // why, and keeps trying; once this build's functions are loaded it serves the queue.
  redis_client r = raw();
  load_another_build(r, "another");
  std::mutex mu;
  std::vector<std::string> logged;
  spool::queue::worker_options o = fast_worker("q", 1);
  o.on_log = [&](std::string_view line) {
    std::lock_guard lock(mu);
    logged.emplace_back(line);
  };
  worker w(url(), o);
  w.handle("echo", echo);
  w.start();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    for (const std::string& line : logged) {
      if (line.find("another spool build (version another") != std::string::npos) return true;
    }
    return false;
  }));
  EXPECT_EQ(text(*r.command({"FCALL_RO", "spool_version", "0"})), "another");

  spool::queue::producer_options po;
  po.connection.replace_functions = true;
  producer p(url(), po);
  EXPECT_EQ(p.submit("q", "echo", "served").result.get(), "served");
  EXPECT_TRUE(eventually([&] { return w.counters().done == 1; }));
}

TEST_F(Worker, HandlerSeesItsJob) {
  std::mutex mu;
  std::string seen;
  worker w(url(), fast_worker("q", 1));
  w.handle("t", [&](const job_context& job, std::string_view) {
    std::lock_guard lock(mu);
    seen = std::string(job.queue) + " " + std::string(job.id) + " " + std::string(job.task) + " " +
           std::string(job.key) + " " + std::to_string(job.attempt) + " " +
           (job.token.cancelled() ? "cancelled" : "live");
    return std::string();
  });
  w.start();
  producer p(url());
  job_options o;
  o.key = "the-key";
  p.submit("q", "t", "", o).result.get();
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, "q q/1 t the-key 1 live");
}

TEST_F(Worker, FailedAttemptsAreRetriedThenTheJobIsDead) {
  worker w(url(), fast_worker("q", 2));
  w.handle("flaky", [](const job_context& job, std::string_view) -> std::string {
    if (job.attempt < 3)
      throw std::runtime_error("attempt " + std::to_string(job.attempt) + " fails");
    return "third time";
  });
  w.handle("broken", [](const job_context&, std::string_view) -> std::string {
    throw std::runtime_error("always broken");
  });
  w.handle("odd", [](const job_context&, std::string_view) -> std::string { throw 42; });
  w.start();
  producer p(url());
  job_options three;
  three.attempts = 3;
  three.backoff = 20ms;
  auto flaky = p.submit("q", "flaky", "", three);
  EXPECT_EQ(flaky.result.get(), "third time");
  auto st = status(flaky.id);
  EXPECT_EQ(st.failures, 2u);
  EXPECT_EQ(st.attempt, 3u);
  EXPECT_EQ(st.outcomes, 1u);
  EXPECT_EQ(st.outcome_attempt, 3u);

  job_options two;
  two.attempts = 2;
  two.backoff = 10ms;
  auto broken = p.submit("q", "broken", "", two);
  try {
    broken.result.get();
    ADD_FAILURE() << "a dead job's future must throw";
  } catch (const spool::queue::job_failed& e) {
    EXPECT_STREQ(e.what(), "always broken");
  }
  EXPECT_EQ(status(broken.id).state, job_state::dead);
  EXPECT_EQ(status(broken.id).failures, 2u);
  auto odd = p.submit("q", "odd");
  EXPECT_EQ(message_of([&] { odd.result.get(); }), "unknown exception");

  spool::queue::admin a(url());
  const auto dead = a.dead("q");
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_EQ(dead[0].id, broken.id);
  EXPECT_EQ(dead[0].error, "always broken");
  const auto s = stats("q");
  EXPECT_EQ(s.dead, 2u);
  EXPECT_EQ(s.failed, 5u);
  EXPECT_EQ(s.retried, 3u);
  EXPECT_EQ(s.died, 2u);

  // Requeued, a dead job runs again; its attempt numbers go on.
  EXPECT_EQ(error_of([&] { a.requeue(flaky.id); }), errc::wrong_state);
  a.requeue(broken.id);
  EXPECT_TRUE(eventually([&] {
    return status(broken.id).state == job_state::dead && status(broken.id).attempt == 4;
  }));
  a.remove(broken.id);
  EXPECT_EQ(error_of([&] { a.status(broken.id); }), errc::not_found);
  EXPECT_EQ(error_of([&] { a.remove(flaky.id); }), errc::wrong_state);
  EXPECT_EQ(a.dead("q").size(), 1u);
}

TEST_F(Worker, UnknownTaskFailsTheAttemptWithItsName) {
  worker w(url(), fast_worker("q", 1));
  w.handle("known", echo);
  w.start();
  producer p(url());
  auto s = p.submit("q", "unknown-task");
  EXPECT_NE(message_of([&] { s.result.get(); }).find("unknown task 'unknown-task'"),
            std::string::npos);
}

TEST_F(Worker, TimeLimitFiresTheTokenAndFailsTheAttempt) {
  std::atomic<int> stopped_by_token{0};
  worker w(url(), fast_worker("q", 1));
  w.handle("slow", [&](const job_context& job, std::string_view) {
    gate never;
    if (!never.wait(job.token)) ++stopped_by_token;
    return std::string("too late");
  });
  w.start();
  producer p(url());
  job_options o;
  o.time_limit = 100ms;
  auto s = p.submit("q", "slow", "", o);
  EXPECT_EQ(message_of([&] { s.result.get(); }), "time limit of 100 ms exceeded");
  EXPECT_TRUE(eventually([&] { return stopped_by_token == 1; }));
  EXPECT_EQ(status(s.id).state, job_state::dead);
  EXPECT_EQ(status(s.id).outcomes, 1u);
}

TEST_F(Worker, CancelledQueuedJobNeverStarts) {
  producer p(url());
  auto doomed = p.submit("q", "t", "doomed");
  job_options later;
  later.delay = 1h;
  auto delayed = p.submit("q", "t", "delayed", later);
  spool::queue::admin a(url());
  EXPECT_EQ(a.cancel(doomed.id), job_state::queued);
  EXPECT_EQ(a.cancel(delayed.id), job_state::delayed);
  EXPECT_EQ(error_of([&] { a.cancel(doomed.id); }), errc::wrong_state);
  EXPECT_EQ(error_of([&] { a.cancel("q/99"); }), errc::not_found);
  EXPECT_THROW(doomed.result.get(), spool::queue::job_cancelled);
  EXPECT_THROW(delayed.result.get(), spool::task_cancelled);

  run_log log;
  worker w(url(), fast_worker("q", 1));
  w.handle("t", log.handler());
  w.start();
  p.submit("q", "t", "after").result.get();
  EXPECT_EQ(log.ran(), std::vector<std::string>{"after"});
  EXPECT_EQ(stats("q").cancelled, 2u);
  EXPECT_EQ(stats("q").queued, 0u);
  EXPECT_EQ(stats("q").delayed, 0u);
}

TEST_F(Worker, CancelledRunningJobFiresItsTokenAndIsNotRetried) {
  std::atomic<bool> running{false};
  std::atomic<bool> token_fired{false};
  worker w(url(), fast_worker("q", 1));
  w.handle("t", [&](const job_context& job, std::string_view) -> std::string {
    running = true;
    gate never;
    if (!never.wait(job.token)) token_fired = true;
    throw std::runtime_error("stopped");
  });
  w.start();
  producer p(url());
  job_options o;
  o.attempts = 5;
  auto s = p.submit("q", "t", "", o);
  ASSERT_TRUE(eventually([&] { return running.load(); }));
  EXPECT_EQ(spool::queue::admin(url()).cancel(s.id), job_state::running);
  EXPECT_THROW(s.result.get(), spool::queue::job_cancelled);
  EXPECT_TRUE(eventually([&] { return token_fired.load(); }));
  EXPECT_TRUE(eventually([&] { return w.counters().in_flight == 0; }));
  const auto st = status(s.id);
  EXPECT_EQ(st.state, job_state::cancelled);
  EXPECT_EQ(st.attempt, 1u);
  EXPECT_EQ(st.outcomes, 1u);
  EXPECT_EQ(w.counters().cancelled, 1u);
}

// Idle workers wait on :ready (BLPOP): every job made ready leaves one token, up to 64; a
// claim that leaves nothing unread answers idle and drops the tokens, all stale by then; a
// claim that fills its room leaves them for the workers still waiting.
TEST_F(Worker, ReadyJobsLeaveOneWakeUpTokenEachUpToTheCap) {
  producer p(url());
  redis_client r = raw();
  const auto tokens = [&] { return r.command({"LLEN", "spool:{q}:ready"})->integer; };
  const auto claim = [&](const std::string& room) {
    return r.command(
        {"FCALL", "spool_claim", "1", "spool:{q}", "q", "ghost", room, "60000", "0", "0"});
  };
  EXPECT_EQ(tokens(), 0);
  // A delayed job due before any other wakes every idle worker (up to the cap), so that they
  // learn its due time; a claim with nothing ready answers idle and drops the tokens.
  job_options later;
  later.delay = std::chrono::hours(1);
  p.submit("q", "t", "x", later);
  EXPECT_EQ(tokens(), 64);
  auto reply = claim("10");
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  EXPECT_EQ(reply->element[0]->elements, 0u);
  EXPECT_EQ(reply->element[3]->integer, 1);
  EXPECT_EQ(tokens(), 0);
  later.delay = std::chrono::hours(2);
  p.submit("q", "t", "x", later);  // due after the first: neither ready nor a wake-up
  EXPECT_EQ(tokens(), 0);

  for (int i = 0; i < 3; ++i) p.submit("q", "t", "x");
  EXPECT_EQ(tokens(), 3);
  std::vector<job_spec> jobs(100, job_spec{"t", "x", {}});
  p.submit_bulk("q", jobs);
  EXPECT_EQ(tokens(), 64);

  // Room for 2 of the 103 ready jobs: filled, not idle; the tokens stay.
  reply = claim("2");
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  EXPECT_EQ(reply->element[0]->elements, 2u);
  EXPECT_EQ(reply->element[3]->integer, 0);
  EXPECT_EQ(tokens(), 64);

  // Room for more than the other 101: idle, and no token is left.
  reply = claim("200");
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << text(*reply);
  EXPECT_EQ(reply->element[0]->elements, 101u);
  EXPECT_EQ(reply->element[3]->integer, 1);
  EXPECT_EQ(tokens(), 0);

  // The next ready job leaves a token again, and a worker that waits takes it.
  auto s = p.submit("q", "t", "y");
  EXPECT_EQ(tokens(), 1);
  worker w(url(), fast_worker("q", 1));
  w.handle("t", echo);
  w.start();
  EXPECT_EQ(s.result.get(), "y");
}

TEST_F(Worker, PausedQueueStartsNothingUntilResumed) {
  producer p(url());
  spool::queue::admin a(url());
  a.pause("q");
  auto s = p.submit("q", "t", "x");
  // Any worker's claim finds the queue paused and starts nothing.
  redis_client r = raw();
  const auto reply =
      r.command({"FCALL", "spool_claim", "1", "spool:{q}", "q", "ghost", "10", "60000", "1", "0"});
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(reply->element[0]->elements, 0u);
  EXPECT_EQ(reply->element[2]->integer, 1);
  // Idle until the resume, which wakes the workers: the submission's token is dropped.
  EXPECT_EQ(reply->element[3]->integer, 1);
  EXPECT_EQ(r.command({"LLEN", "spool:{q}:ready"})->integer, 0);
  EXPECT_TRUE(stats("q").paused);
  worker w(url(), fast_worker("q", 1));
  w.handle("t", echo);
  w.start();
  a.resume("q");
  EXPECT_EQ(s.result.get(), "x");
  EXPECT_FALSE(stats("q").paused);
}

TEST_F(Worker, HigherPrioritiesRunFirstWithStrictLevels) {
  producer p(url());
  spool::queue::admin a(url());
  a.pause("q");
  std::vector<spool::queue::submitted> jobs;
  for (auto [prio, name] :
       {std::pair{spool::priority::low, "low"}, std::pair{spool::priority::normal, "normal"},
        std::pair{spool::priority::high, "high"}}) {
    for (int i = 0; i < 3; ++i) {
      job_options o;
      o.priority = prio;
      jobs.push_back(p.submit("q", "t", std::string(name) + std::to_string(i), o));
    }
  }
  EXPECT_EQ(resume_and_run(a, jobs, 0ms),
            (std::vector<std::string>{"high0", "high1", "high2", "normal0", "normal1", "normal2",
                                      "low0", "low1", "low2"}));
}

TEST_F(Worker, AgingServesALowJobBeforeTheNormalBacklogEnds) {
  producer p(url());
  spool::queue::admin a(url());
  a.pause("q");
  std::vector<job_spec> normal(20, job_spec{"t", "normal", {}});
  auto jobs = p.submit_bulk("q", normal);
  job_options low;
  low.priority = spool::priority::low;
  jobs.push_back(p.submit("q", "t", "low", low));
  EXPECT_NE(resume_and_run(a, jobs, 1ms).back(), "low");
}

TEST_F(Worker, ClaimsNoMoreThanThePoolHasRoomFor) {
  producer p(url());
  std::vector<job_spec> specs(10, job_spec{"t", "", {}});
  auto jobs = p.submit_bulk("q", specs);
  gate release;
  std::atomic<int> running{0};
  auto handler = [&](const job_context& job, std::string_view) {
    ++running;
    release.wait(job.token);
    return std::string();
  };
  worker first(url(), fast_worker("q", 2));
  first.handle("t", handler);
  first.start();
  ASSERT_TRUE(eventually([&] { return running == 2; }));
  EXPECT_EQ(first.counters().in_flight, 2u);
  auto s = stats("q");
  EXPECT_EQ(s.running, 2u);
  EXPECT_EQ(s.queued, 8u);
  // An idle worker elsewhere gets the rest.
  auto with_prefetch = fast_worker("q", 1);
  with_prefetch.prefetch = 2;
  worker second(url(), with_prefetch);
  second.handle("t", handler);
  second.start();
  // Redis counts the jobs running as the claim runs there; the worker counts them once the
  // claim's reply is in its held-jobs table: wait for both.
  ASSERT_TRUE(
      eventually([&] { return stats("q").running == 5 && second.counters().in_flight >= 3u; }));
  EXPECT_EQ(second.counters().in_flight, 3u);
  EXPECT_EQ(stats("q").queued, 5u);
  release.open();
  for (auto& j : jobs) j.result.get();
}

TEST_F(Worker, StopHandsBackUnstartedJobsAtOnceAndFinishesRunningOnes) {
  producer p(url());
  gate release;
  std::atomic<int> started{0};
  auto options = fast_worker("q", 1);
  options.prefetch = 3;
  auto w = std::make_unique<worker>(url(), options);
  w->handle("t", [&](const job_context& job, std::string_view) {
    ++started;
    release.wait(job.token);
    return std::string("finished");
  });
  w->start();
  std::vector<job_spec> specs(4, job_spec{"t", "", {}});
  auto jobs = p.submit_bulk("q", specs);
  // Four claimed (one thread and three of prefetch), one of them started.
  ASSERT_TRUE(eventually([&] { return stats("q").running == 4 && started == 1; }));
  std::thread stopper([&] { w->stop(); });
  // The three waiting in the pool go back at once, while the running one still runs.
  ASSERT_TRUE(eventually([&] { return stats("q").queued == 3; }));
  EXPECT_EQ(stats("q").running, 1u);
  release.open();
  stopper.join();
  EXPECT_EQ(w->counters().handed_back, 3u);
  EXPECT_EQ(started, 1);
  EXPECT_EQ(jobs[0].result.get(), "finished");
  const auto s = stats("q");
  EXPECT_EQ(s.handed_back, 3u);
  EXPECT_EQ(s.running, 0u);
  EXPECT_TRUE(s.workers.empty());  // it left the group
  w.reset();
  // Another worker runs them; their attempt numbers go on past the handed-back ones.
  worker next(url(), fast_worker("q", 2));
  next.handle("t", [](const job_context& job, std::string_view) {
    return "attempt " + std::to_string(job.attempt);
  });
  next.start();
  for (int i = 1; i < 4; ++i) EXPECT_EQ(jobs[i].result.get(), "attempt 2");
}

TEST_F(Worker, DrainTimeoutHandsBackRunningJobsAndFiresTheirTokens) {
  producer p(url());
  std::atomic<bool> running{false};
  std::atomic<bool> token_fired{false};
  auto options = fast_worker("q", 1);
  options.drain_timeout = 50ms;
  worker w(url(), options);
  w.handle("t", [&](const job_context& job, std::string_view) {
    running = true;
    gate never;
    if (!never.wait(job.token)) token_fired = true;
    return std::string("ignored");
  });
  w.start();
  auto s = p.submit("q", "t");
  ASSERT_TRUE(eventually([&] { return running.load(); }));
  w.stop();
  EXPECT_EQ(status(s.id).state, job_state::queued);
  EXPECT_TRUE(eventually([&] { return token_fired.load(); }));
  EXPECT_EQ(w.counters().handed_back, 1u);
  w.stop();  // again: nothing to do
}

TEST_F(Worker, ExpiredLeaseIsTakenOverAndTheStaleAttemptIsFenced) {
  producer p(url());
  auto s = p.submit("q", "t", "payload");
  // A worker claims it and goes silent (it never renews).
  const claimed ghost = ghost_claim("q");
  EXPECT_EQ(ghost.attempt, "1");
  EXPECT_EQ(status(s.id).owner, "ghost");
  gate release;
  std::atomic<std::uint64_t> attempt_seen{0};
  worker w(url(), fast_worker("q", 1));
  w.handle("t", [&](const job_context& job, std::string_view) {
    attempt_seen = job.attempt;
    release.wait(job.token);
    return std::string("from the new attempt");
  });
  w.start();
  ASSERT_TRUE(eventually([&] { return attempt_seen == 2; }));
  EXPECT_EQ(status(s.id).takeovers, 1u);
  EXPECT_EQ(status(s.id).owner, w.name());
  EXPECT_EQ(w.counters().takeovers, 1u);
  // The ghost wakes up late: its outcome is refused, its lease is gone.
  EXPECT_EQ(ghost_finish("q", ghost, "from the stale attempt"), "stale");
  redis_client r = raw();
  const auto renew = r.command({"FCALL", "spool_renew", "1", "spool:{q}", "q", "ghost", "1",
                                ghost.number, ghost.attempt, "0-0", "1"});
  EXPECT_EQ(text(*renew->element[0]), "0");
  release.open();
  EXPECT_EQ(s.result.get(), "from the new attempt");
  const auto st = status(s.id);
  EXPECT_EQ(st.outcomes, 1u);
  EXPECT_EQ(st.outcome_attempt, 2u);
  // A repeat of the recorded outcome (its reply lost) is recognised, and changes nothing.
  const claimed recorded{ghost.number, "2"};
  EXPECT_EQ(ghost_finish("q", recorded, "again", w.name()), "dup");
  EXPECT_EQ(status(s.id).result, "from the new attempt");
}

TEST_F(Worker, JobOutOfTakeoversIsDead) {
  producer p(url());
  job_options o;
  o.takeovers = 1;
  auto s = p.submit("q", "t", "", o);
  ghost_claim("q", "ghost1", "100");
  ASSERT_TRUE(eventually([&] {
    redis_client r = raw();
    const auto reply =
        r.command({"FCALL", "spool_claim", "1", "spool:{q}", "q", "ghost2", "1", "100", "1", "0"});
    return reply->element[0]->elements == 1;
  }));
  EXPECT_EQ(status(s.id).takeovers, 1u);
  // The second expiry is one too many.
  ASSERT_TRUE(eventually([&] {
    redis_client r = raw();
    r.command({"FCALL", "spool_claim", "1", "spool:{q}", "q", "ghost3", "1", "100", "1", "0"});
    return status(s.id).state == job_state::dead;
  }));
  EXPECT_NE(status(s.id).error.find("lost its lease 2 times"), std::string::npos);
  EXPECT_THROW(s.result.get(), spool::queue::job_failed);
}

TEST_F(Worker, RenewalKeepsTheLeaseOfABusyHandler) {
  // Every pool thread spins for three leases; the lease keeper is not a pool thread, so the
  // leases hold and a second worker never takes the jobs over.
  auto options = fast_worker("q", 2);
  options.lease = 1000ms;
  options.check_interval = 100ms;
  auto spin = [](const job_context&, std::string_view) {
    const auto end = std::chrono::steady_clock::now() + 3s;
    volatile unsigned long x = 0;
    while (std::chrono::steady_clock::now() < end) x = x + 1;
    return std::string("spun");
  };
  worker busy(url(), options);
  busy.handle("spin", spin);
  busy.start();
  producer p(url());
  std::vector<job_spec> specs(2, job_spec{"spin", "", {}});
  auto jobs = p.submit_bulk("q", specs);
  ASSERT_TRUE(eventually([&] { return stats("q").running == 2; }));
  worker idle(url(), options);
  idle.handle("spin", spin);
  idle.start();
  for (auto& j : jobs) EXPECT_EQ(j.result.get(), "spun");
  EXPECT_EQ(stats("q").takeovers, 0u);
  EXPECT_EQ(idle.counters().started, 0u);
}

TEST_F(Worker, MalformedStreamEntriesGoToTheDeadListWithTheReason) {
  producer p(url());
  p.submit("q", "t", "before");
  redis_client r = raw();
  const auto no_field = r.command({"XADD", "spool:{q}:normal", "*", "foo", "bar"});
  const auto no_job = r.command({"XADD", "spool:{q}:normal", "*", "job", "999"});
  p.submit("q", "t", "after");
  worker w(url(), fast_worker("q", 1));
  w.handle("t", echo);
  w.start();
  ASSERT_TRUE(eventually([&] { return stats("q").done == 2; }));
  spool::queue::admin a(url());
  const auto dead = a.dead("q");
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_EQ(dead[0].id, "q/bad-" + text(*no_field));
  EXPECT_NE(dead[0].error.find("no job field"), std::string::npos) << dead[0].error;
  EXPECT_NE(dead[1].error.find("q/999 does not exist"), std::string::npos) << dead[1].error;
  EXPECT_EQ(a.status(dead[0].id).state, job_state::dead);
  EXPECT_EQ(stats("q").malformed, 2u);
  EXPECT_EQ(error_of([&] { a.requeue(dead[0].id); }), errc::wrong_state);
  a.remove(dead[0].id);
  EXPECT_EQ(a.dead("q").size(), 1u);
  // The stream keeps no entry of a finished job.
  EXPECT_EQ(r.command({"XLEN", "spool:{q}:normal"})->integer, 0);
}

TEST_F(Worker, ResultsExpireAsAsked) {
  worker w(url(), fast_worker("q", 1));
  w.handle("t", echo);
  w.start();
  producer p(url());
  job_options o;
  o.result_ttl = 100s;
  o.key = "k";
  auto s = p.submit("q", "t", "", o);
  s.result.get();
  redis_client r = raw();
  const auto ttl = r.command({"TTL", "spool:{q}:job:1"})->integer;
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 100);
  EXPECT_GT(r.command({"TTL", "spool:{q}:key:k"})->integer, 0);
  job_options forever;
  forever.result_ttl = 0s;
  auto kept = p.submit("q", "t", "", forever);
  kept.result.get();
  EXPECT_EQ(r.command({"TTL", "spool:{q}:job:2"})->integer, -1);
}

TEST_F(Worker, ResultAboveTheLimitFailsTheAttempt) {
  auto options = fast_worker("q", 1);
  options.max_result = 10;
  worker w(url(), options);
  w.handle("t", [](const job_context&, std::string_view) { return std::string(11, 'r'); });
  w.start();
  producer p(url());
  auto s = p.submit("q", "t");
  EXPECT_NE(message_of([&] { s.result.get(); }).find("11 bytes: the limit is 10"),
            std::string::npos);
}

TEST_F(Worker, CallsOutOfOrderAndBadOptionsAreRefused) {
  EXPECT_EQ(error_of([&] { worker w(url(), fast_worker("my queue", 1)); }), errc::invalid_argument);
  auto bad = fast_worker("q", 1);
  bad.lease = 50ms;
  EXPECT_EQ(error_of([&] { worker w(url(), bad); }), errc::invalid_argument);
  bad = fast_worker("q", 1);
  bad.check_interval = bad.lease;
  EXPECT_NE(message_of([&] { worker w(url(), bad); }).find("lease / 2"), std::string::npos);
  bad = fast_worker("q", 1);
  bad.prefetch = 10001;
  EXPECT_EQ(error_of([&] { worker w(url(), bad); }), errc::invalid_argument);
  bad = fast_worker("q", 1);
  bad.name = "with space";
  EXPECT_EQ(error_of([&] { worker w(url(), bad); }), errc::invalid_argument);

  worker w(url(), fast_worker("q", 1));
  EXPECT_EQ(error_of([&] { w.handle("bad name", echo); }), errc::invalid_argument);
  EXPECT_EQ(error_of([&] { w.handle("t", nullptr); }), errc::invalid_argument);
  w.stop();  // before start: nothing to do
  w.handle("t", echo);
  w.start();
  EXPECT_EQ(error_of([&] { w.start(); }), errc::wrong_order);
  EXPECT_EQ(error_of([&] { w.handle("u", echo); }), errc::wrong_order);
}

TEST_F(Worker, StartsWhileRedisIsDownAndRunsOnceItIsUp) {
  server().stop();
  worker w(url(), fast_worker("q", 1));
  w.handle("t", echo);
  w.start();  // returns: it keeps trying in the background
  EXPECT_TRUE(eventually([&] { return w.counters().redis_errors > 0; }));
  server().start();
  producer p(url());
  EXPECT_EQ(p.submit("q", "t", "up").result.get(), "up");
}

TEST_F(Worker, PoolThatRefusesHandsTheJobBack) {
  spool::pool pool(spool::config{});
  auto options = fast_worker("q", 0);
  options.pool = &pool;
  worker w(url(), options);
  w.handle("t", echo);
  w.start();
  producer p(url());
  EXPECT_EQ(p.submit("q", "t", "runs").result.get(), "runs");
  pool.shutdown();
  auto s = p.submit("q", "t", "refused");
  // The job goes back, and the worker, whose pool takes nothing more, stops.
  w.wait();
  EXPECT_EQ(w.counters().handed_back, 1u);
  EXPECT_EQ(status(s.id).state, job_state::queued);
}

TEST_F(Worker, PrometheusTextHasTheCounters) {
  worker w(url(), fast_worker("q", 1));
  w.handle("t", echo);
  w.start();
  producer p(url());
  p.submit("q", "t").result.get();
  ASSERT_TRUE(eventually([&] { return w.counters().done == 1; }));
  const std::string text = w.prometheus();
  for (const char* line :
       {"spool_queue_worker_started_total{queue=\"q\"", "spool_queue_worker_done_total{queue=\"q\"",
        "spool_queue_worker_lease_takeovers_total", "spool_queue_worker_given_total",
        "spool_queue_worker_in_flight", "spool_queue_worker_handler_seconds_bucket",
        "le=\"+Inf\"} 1", "spool_queue_worker_handler_seconds_count"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

TEST_F(Worker, ManyJobsOnTwoWorkersEachRecordedOnce) {
  // For the sanitizers: every part of two workers busy at once.
  const int n = 2000;
  std::atomic<int> ran{0};
  auto handler = [&](const job_context& job, std::string_view payload) {
    ++ran;
    return std::string(payload) + ":" + std::to_string(job.attempt);
  };
  auto options = fast_worker("q", 3);
  options.prefetch = 2;
  worker a(url(), options);
  worker b(url(), options);
  a.handle("t", handler);
  b.handle("t", handler);
  a.start();
  b.start();
  producer p(url());
  std::vector<job_spec> specs;
  for (int i = 0; i < n; ++i) specs.push_back({"t", std::to_string(i), {}});
  std::vector<spool::queue::submitted> jobs;
  for (int from = 0; from < n; from += 100) {
    auto part = p.submit_bulk("q", std::span(specs).subspan(from, 100));
    for (auto& j : part) jobs.push_back(std::move(j));
  }
  for (int i = 0; i < n; ++i) EXPECT_EQ(jobs[i].result.get(), std::to_string(i) + ":1");
  EXPECT_EQ(ran, n);
  const auto s = stats("q");
  EXPECT_EQ(s.done, static_cast<std::uint64_t>(n));
  EXPECT_EQ(s.queued + s.running + s.takeovers, 0u);
  // A worker counts a result once Redis has answered the call that records it, which can be
  // after the producer has seen that result: the counters are final once both have stopped.
  a.stop();
  b.stop();
  EXPECT_EQ(a.counters().done + b.counters().done, static_cast<std::uint64_t>(n));
  EXPECT_EQ(a.counters().stale + b.counters().stale, 0u);
}

}  // namespace
