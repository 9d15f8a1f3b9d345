// What a submission from outside the pool does when the bounded queue is full, per full_policy,
// and that submissions from the pool's own workers ignore the bound.
//
// Every test first holds all workers at a latch, so the queue is empty and the next
// `queue_capacity` submissions fill it exactly; nothing leaves the queue until the latch opens.
#include <gtest/gtest.h>

#include <spool/spool.h>
#include <spool/spool.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <latch>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "core_testing.hpp"
#include "stress_scale.hpp"
#include "support.hpp"

using namespace std::chrono_literals;

namespace {

// A policy outside the enumeration, or a negative timeout, is refused when the pool is made.
TEST(FullPolicyConfig, OutOfRangePolicyAndNegativeTimeoutAreRefused) {
  for (int bad : {-1, 5, 99}) {
    spool::config cfg = spool_test::pool_config(1, 4);
    cfg.on_full = static_cast<spool::full_policy>(bad);
    EXPECT_EQ(spool_test::error_code_of([&] { spool::pool p{cfg}; }), spool::errc::invalid_argument)
        << bad;
  }
  spool::config cfg = spool_test::pool_config(1, 4, spool::full_policy::block_for);
  cfg.block_timeout = -std::chrono::milliseconds(1);
  EXPECT_EQ(spool_test::error_code_of([&] { spool::pool p{cfg}; }), spool::errc::invalid_argument);
  cfg.block_timeout = std::chrono::nanoseconds::zero();
  spool::pool ok{cfg};
  EXPECT_EQ(ok.submit([] { return 1; }).get(), 1);
}

using namespace spool_test;

// A flag another thread sets once, which this one can wait for (or check it stays unset).
class flag {
 public:
  void set() {
    std::lock_guard lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  // Waits up to `timeout`; returns whether the flag was set. Used only to check that something
  // has NOT happened yet: a slow machine can make it pass spuriously, never fail spuriously.
  bool set_within(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

}  // namespace

// reject: a full queue refuses with errc::full through every entry point, nothing queued is lost,
// the refused callables never run and are released, and stats.rejected counts each refusal.
TEST(FullPolicyReject, RefusesAndLosesNothing) {
  std::latch started{2};
  std::atomic<int> queued_ran{0};
  std::atomic<bool> refused_ran{false};
  auto token = std::make_shared<int>(0);
  spool::pool p{pool_config(2, 2, spool::full_policy::reject)};
  gate release;  // after the pool: if a post() below throws, it opens before the pool drains
  hold_workers(p, started, release);

  p.post([&] { ++queued_ran; });
  p.post([&] { ++queued_ran; });
  EXPECT_EQ(p.try_post([&, token] { refused_ran = true; }), spool::errc::full);
  EXPECT_EQ(error_code_of([&] { (void)p.submit([&, token] { refused_ran = true; }); }),
            spool::errc::full);
  EXPECT_EQ(error_code_of([&] { p.post([&, token] { refused_ran = true; }); }), spool::errc::full);
  EXPECT_EQ(token.use_count(), 1) << "a refused callable was kept";

  spool::stats s = p.statistics();
  EXPECT_EQ(s.rejected, 3u);
  EXPECT_EQ(s.queued, 2u);
  EXPECT_EQ(s.submitted, 4u);  // two holders, two queued

  release.open();
  p.wait_idle();
  EXPECT_EQ(queued_ran, 2);
  EXPECT_FALSE(refused_ran);
  EXPECT_EQ(p.statistics().completed, 4u);
  // Room again: the pool accepts.
  EXPECT_FALSE(p.try_post([] {}));
}

// block: a producer facing a full queue waits, and resumes once a worker takes a task and so
// frees room. The producer cannot return before the latch opens: until then no worker is free.
TEST(FullPolicyBlock, ProducerWaitsUntilAWorkerFreesRoom) {
  std::latch started{1}, release{1}, about_to_post{1};
  std::atomic<bool> released{false}, saw_released{false};
  std::atomic<int> ran{0};
  flag returned;
  spool::pool p{pool_config(1, 1, spool::full_policy::block)};
  hold_workers(p, started, release);
  p.post([&] { ++ran; });  // fills the queue

  std::thread producer([&] {
    about_to_post.count_down();
    p.post([&] { ++ran; });
    saw_released = released.load();
    returned.set();
  });
  about_to_post.wait();
  EXPECT_FALSE(returned.set_within(20ms)) << "post() returned while the queue was full";
  EXPECT_EQ(p.statistics().submitted, 2u);

  released = true;
  release.count_down();
  producer.join();
  EXPECT_TRUE(saw_released) << "post() returned before any room was freed";
  p.wait_idle();
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(p.statistics().rejected, 0u);
}

// block: close() wakes a blocked producer with errc::shut_down; its task never runs, and what
// was already queued still runs.
TEST(FullPolicyBlock, BlockedProducerWakesWithShutDownOnClose) {
  std::latch started{1}, release{1}, about_to_post{1};
  std::atomic<bool> queued_ran{false}, refused_ran{false};
  std::error_code producer_result;
  spool::pool p{pool_config(1, 1, spool::full_policy::block)};
  hold_workers(p, started, release);
  p.post([&] { queued_ran = true; });

  std::thread producer([&] {
    about_to_post.count_down();
    producer_result = error_code_of([&] { p.post([&] { refused_ran = true; }); });
  });
  about_to_post.wait();
  p.close();
  producer.join();  // while the worker is still held
  EXPECT_EQ(producer_result, spool::errc::shut_down);

  release.count_down();
  EXPECT_EQ(p.shutdown(), 0u);
  EXPECT_TRUE(queued_ran);
  EXPECT_FALSE(refused_ran);
  EXPECT_EQ(p.statistics().rejected, 1u);
}

// block: shutdown() (either mode), running in another thread, wakes a blocked producer with
// errc::shut_down before the held worker is released.
TEST(FullPolicyBlock, BlockedProducerWakesWithShutDownOnShutdown) {
  for (spool::shutdown_mode mode : {spool::shutdown_mode::drain, spool::shutdown_mode::discard}) {
    SCOPED_TRACE(mode == spool::shutdown_mode::drain ? "drain" : "discard");
    std::latch started{1}, release{1}, about_to_post{1};
    std::atomic<bool> refused_ran{false};
    std::error_code producer_result;
    std::size_t dropped = 99;
    spool::pool p{pool_config(1, 1, spool::full_policy::block)};
    hold_workers(p, started, release);
    auto queued = p.submit([] { return 1; });

    std::thread producer([&] {
      about_to_post.count_down();
      producer_result = error_code_of([&] { p.post([&] { refused_ran = true; }); });
    });
    about_to_post.wait();
    std::thread stopper([&] { dropped = p.shutdown(mode); });
    producer.join();  // the worker is still held: shutdown must not wait for it to wake producers
    EXPECT_EQ(producer_result, spool::errc::shut_down);

    release.count_down();
    stopper.join();
    EXPECT_FALSE(refused_ran);
    if (mode == spool::shutdown_mode::drain) {
      EXPECT_EQ(dropped, 0u);
      EXPECT_EQ(queued.get(), 1);
    } else {
      EXPECT_EQ(dropped, 1u);
      EXPECT_THROW(queued.get(), spool::task_cancelled);
    }
  }
}

// block_for: the queue stays full for the whole timeout, so the submission fails with
// errc::timed_out (counted as rejected) and the callable never runs.
TEST(FullPolicyBlockFor, TimesOutWhileFull) {
  std::latch started{1};
  std::atomic<bool> queued_ran{false}, refused_ran{false};
  spool::config cfg = pool_config(1, 1, spool::full_policy::block_for);
  cfg.block_timeout = 20ms;
  spool::pool p{cfg};
  gate release;  // after the pool: if the post() below throws, it opens before the pool drains
  hold_workers(p, started, release);
  p.post([&] { queued_ran = true; });

  EXPECT_EQ(p.try_post([&] { refused_ran = true; }), spool::errc::timed_out);
  EXPECT_EQ(error_code_of([&] { (void)p.submit([&] { refused_ran = true; }); }),
            spool::errc::timed_out);
  EXPECT_EQ(p.statistics().rejected, 2u);

  release.open();
  p.wait_idle();
  EXPECT_TRUE(queued_ran);
  EXPECT_FALSE(refused_ran);
}

// block_for: when room is freed before the timeout, the waiting submission succeeds.
TEST(FullPolicyBlockFor, SucceedsWhenRoomIsFreedInTime) {
  std::latch started{1}, release{1}, about_to_post{1};
  std::atomic<bool> released{false}, saw_released{false};
  std::atomic<int> ran{0};
  std::error_code producer_result = spool::errc::system;
  spool::config cfg = pool_config(1, 1, spool::full_policy::block_for);
  cfg.block_timeout = 10min;  // far beyond the test: only freed room can end the wait
  spool::pool p{cfg};
  hold_workers(p, started, release);
  p.post([&] { ++ran; });

  std::thread producer([&] {
    about_to_post.count_down();
    producer_result = p.try_post([&] { ++ran; });
    saw_released = released.load();
  });
  about_to_post.wait();
  released = true;
  release.count_down();
  producer.join();
  EXPECT_FALSE(producer_result) << producer_result.message();
  EXPECT_TRUE(saw_released) << "the submission returned before any room was freed";
  p.wait_idle();
  EXPECT_EQ(ran, 2);
}

// caller_runs: a submission to a full queue runs at once in the submitting thread; futures and
// the exception handler behave as for any other task.
TEST(FullPolicyCallerRuns, RunsInTheSubmittingThread) {
  std::latch started{1}, release{1};
  std::atomic<bool> queued_ran{false};
  std::atomic<int> handled{0};
  spool::config cfg = pool_config(1, 1, spool::full_policy::caller_runs);
  cfg.on_exception = [&](std::exception_ptr) { ++handled; };
  spool::pool p{cfg};
  hold_workers(p, started, release);
  p.post([&] { queued_ran = true; });

  auto f = p.submit(
      [] { return std::make_pair(std::this_thread::get_id(), spool::this_worker_index()); });
  EXPECT_TRUE(f.ready()) << "the task should have run inside submit()";
  auto [id, index] = f.get();
  EXPECT_EQ(id, std::this_thread::get_id());
  EXPECT_EQ(index, -1);

  std::thread::id post_thread;
  p.post([&] { post_thread = std::this_thread::get_id(); });
  EXPECT_EQ(post_thread, std::this_thread::get_id());  // already set: it ran inside post()

  std::thread other([&] {
    auto g = p.submit([] { return std::this_thread::get_id(); });
    EXPECT_EQ(g.get(), std::this_thread::get_id());
  });
  other.join();

  auto failing = p.submit([]() -> int { throw std::runtime_error("in caller"); });
  EXPECT_THROW((void)failing.get(), std::runtime_error);
  EXPECT_NO_THROW(p.post([] { throw std::runtime_error("posted in caller"); }));
  EXPECT_EQ(handled, 1);

  EXPECT_FALSE(queued_ran);  // the worker is still held: everything above ran in this thread
  release.count_down();
  p.wait_idle();
  EXPECT_TRUE(queued_ran);
  EXPECT_EQ(p.statistics().rejected, 0u);
}

// discard_oldest: the oldest queued task is dropped (its future throws task_cancelled, its
// callable never runs, stats.cancelled counts it) and the new submission is queued and runs.
TEST(FullPolicyDiscardOldest, DropsTheOldestQueuedTask) {
  std::latch started{1}, release{1};
  std::atomic<bool> oldest_ran{false};
  auto token = std::make_shared<int>(0);
  spool::pool p{pool_config(1, 2, spool::full_policy::discard_oldest)};
  hold_workers(p, started, release);

  auto oldest = p.submit([&, token] {
    oldest_ran = true;
    return 1;
  });
  auto second = p.submit([] { return 2; });
  auto newest = p.submit([] { return 3; });

  EXPECT_TRUE(oldest.ready()) << "the dropped task's future should be ready at once";
  EXPECT_FALSE(second.ready());
  try {
    (void)oldest.get();
    ADD_FAILURE() << "the oldest task was not dropped";
  } catch (const spool::task_cancelled& e) {
    EXPECT_EQ(e.code(), spool::errc::cancelled);
  }
  EXPECT_EQ(token.use_count(), 1) << "the dropped callable was kept";
  spool::stats s = p.statistics();
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.queued, 2u);

  // Posted tasks are dropped the same way.
  std::atomic<bool> posted_ran{false};
  p.post([&] { posted_ran = true; });  // drops `second`
  EXPECT_THROW((void)second.get(), spool::task_cancelled);
  p.post([] {});  // drops `newest`
  EXPECT_THROW((void)newest.get(), spool::task_cancelled);
  EXPECT_EQ(p.statistics().cancelled, 3u);

  release.count_down();
  p.wait_idle();
  EXPECT_FALSE(oldest_ran);
  EXPECT_TRUE(posted_ran);
}

namespace c_api {

struct hold_ctx {
  std::latch* started;
  std::latch* release;
};
void hold(void* arg) {
  auto* h = static_cast<hold_ctx*>(arg);
  h->started->count_down();
  h->release->wait();
}

struct job {
  std::atomic<int> ran{0};
  std::atomic<int> cancelled{0};
  std::thread::id cancelled_on;
};
void run_job(void* arg) { ++static_cast<job*>(arg)->ran; }
void cancel_job(void* arg) {
  auto* j = static_cast<job*>(arg);
  j->cancelled_on = std::this_thread::get_id();
  ++j->cancelled;
}

}  // namespace c_api

// The C API's discard_oldest calls the dropped task's on_cancel hook with its arg, from the
// thread that dropped it, instead of running it.
TEST(FullPolicyDiscardOldest, CApiCallsOnCancel) {
  std::latch started{1}, release{1};
  c_api::hold_ctx holder{&started, &release};
  c_api::job first, second, third;
  spool_config cfg;
  spool_config_init(&cfg);
  cfg.threads = 1;
  cfg.queue_capacity = 1;
  cfg.on_full = SPOOL_FULL_DISCARD_OLDEST;
  spool_pool* pool = nullptr;
  ASSERT_EQ(spool_create(&cfg, &pool), SPOOL_OK);

  ASSERT_EQ(spool_submit(pool, c_api::hold, &holder), SPOOL_OK);
  started.wait();
  EXPECT_EQ(spool_submit_ex(pool, c_api::run_job, &first, c_api::cancel_job), SPOOL_OK);
  EXPECT_EQ(spool_submit_ex(pool, c_api::run_job, &second, c_api::cancel_job), SPOOL_OK);
  EXPECT_EQ(first.cancelled, 1);
  EXPECT_EQ(first.cancelled_on, std::this_thread::get_id());
  EXPECT_EQ(second.cancelled, 0);
  // A task without a hook is dropped silently.
  EXPECT_EQ(spool_submit(pool, c_api::run_job, &third), SPOOL_OK);
  EXPECT_EQ(second.cancelled, 1);

  spool_stats s;
  ASSERT_EQ(spool_get_stats(pool, &s), SPOOL_OK);
  EXPECT_EQ(s.cancelled, 2u);

  release.count_down();
  EXPECT_EQ(spool_wait_idle(pool), SPOOL_OK);
  EXPECT_EQ(first.ran, 0);
  EXPECT_EQ(second.ran, 0);
  EXPECT_EQ(third.ran, 1);
  EXPECT_EQ(third.cancelled, 0);
  EXPECT_EQ(spool_destroy(pool), SPOOL_OK);
}

// A task running on a worker submits to its own deque, never to the bounded queue: with the
// queue full and the only worker busy submitting, no policy blocks, refuses or runs inline.
TEST(WorkerSubmissions, IgnoreTheBound) {
  for (spool::full_policy policy :
       {spool::full_policy::block, spool::full_policy::block_for, spool::full_policy::reject,
        spool::full_policy::caller_runs, spool::full_policy::discard_oldest}) {
    SCOPED_TRACE(static_cast<int>(policy));
    constexpr int children = 1000;
    std::latch started{1};
    std::atomic<int> refusals{0}, inline_runs{0}, ran{0};
    std::atomic<bool> filler_ran{false};
    spool::config cfg = pool_config(1, 1, policy);
    cfg.block_timeout = 10min;
    spool::pool p{cfg};
    gate queue_full;  // after the pool: if the filler's post() throws, it opens before the drain
    p.post([&] {
      started.count_down();
      queue_full.wait();
      for (int i = 0; i < children; ++i) {
        if (p.try_post([&] { ++ran; })) ++refusals;
      }
      // Queued children cannot have run yet: this is the only worker and it is still here.
      inline_runs = ran.load();
    });
    started.wait();
    p.post([&] { filler_ran = true; });  // fills the bounded queue
    queue_full.open();
    p.wait_idle();
    EXPECT_EQ(refusals, 0);
    EXPECT_EQ(inline_runs, 0);
    EXPECT_EQ(ran, children);
    EXPECT_TRUE(filler_ran);
    EXPECT_EQ(p.statistics().cancelled, 0u);
  }
}

// ---- The bound across producer slots (queues/README.md, "The bound") ----
//
// A bounded pool's outside threads submit into their own producer slots after reserving room
// in one count, which whoever takes a task out gives back. These tests check what that must
// keep: a producer's order, the bound itself under many producers (past the slots too), the
// count back at zero whatever path took the tasks, and the policies' outcomes.

namespace {

std::size_t bound_in_use(spool::pool& p) {
  return spool::detail::core_testing::bound_in_use(spool::detail::pool_access::of(p));
}

}  // namespace

// One producer blocked again and again by a bound of 4: its tasks still run in the order it
// submitted them (one worker, so running order is starting order).
TEST(BoundedSlots, OneProducersTasksStartInOrderUnderBlock) {
  const int n = stress_iterations(20000);
  spool::pool p{pool_config(1, 4, spool::full_policy::block)};
  std::vector<int> order;
  for (int i = 0; i < n; ++i) p.post([&order, i] { order.push_back(i); });
  p.wait_idle();
  ASSERT_EQ(order.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(bound_in_use(p), 0u);
}

// Many producers, more than the pool has producer slots (so some submit through the injector),
// each policy but discard_oldest: the room in use never passes the bound, every accepted task
// runs exactly once, every refusal and inline run is counted, and the count ends at zero.
TEST(BoundedSlots, ManyProducersKeepTheBoundAndLoseNothing) {
  constexpr std::size_t capacity = 8;
  constexpr int producers = 40;  // past the 32 producer slots
  const int per_producer = stress_iterations(2000);
  for (spool::full_policy policy : {spool::full_policy::block, spool::full_policy::block_for,
                                    spool::full_policy::reject, spool::full_policy::caller_runs}) {
    SCOPED_TRACE(static_cast<int>(policy));
    spool::config cfg = pool_config(2, capacity, policy);
    cfg.block_timeout = 10min;
    spool::pool p{cfg};
    std::atomic<int> ran{0}, ran_inline{0}, refused{0};
    std::atomic<bool> done{false};
    std::size_t most_in_use = 0;
    std::thread watcher([&] {
      while (!done.load()) most_in_use = std::max(most_in_use, bound_in_use(p));
    });
    std::vector<std::thread> threads;
    threads.reserve(producers);
    for (int k = 0; k < producers; ++k) {
      threads.emplace_back([&] {
        const std::thread::id me = std::this_thread::get_id();
        for (int i = 0; i < per_producer; ++i) {
          if (p.try_post([&, me] {
                ++ran;
                if (std::this_thread::get_id() == me) ++ran_inline;
              })) {
            ++refused;
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    p.wait_idle();
    done = true;
    watcher.join();
    const int total = producers * per_producer;
    EXPECT_LE(most_in_use, capacity);
    EXPECT_EQ(bound_in_use(p), 0u);
    EXPECT_EQ(ran + refused, total);
    const spool::stats s = p.statistics();
    EXPECT_EQ(s.rejected, static_cast<std::uint64_t>(refused.load()));
    EXPECT_EQ(s.completed, static_cast<std::uint64_t>(ran.load()));
    if (policy == spool::full_policy::reject) {
      EXPECT_EQ(ran_inline, 0);
    } else {
      EXPECT_EQ(refused, 0);
    }
    if (policy != spool::full_policy::caller_runs) {
      EXPECT_EQ(ran_inline, 0);
    }
  }
}

// A discarding shutdown drops what waits in the producer slots and gives its room back; the
// dropped tasks' futures report cancellation.
TEST(BoundedSlots, DiscardingShutdownGivesTheRoomBack) {
  spool::pool p{pool_config(1, 4, spool::full_policy::reject)};
  gate release;
  std::latch started{1};
  hold_workers(p, started, release);
  std::vector<spool::future<int>> queued;
  queued.reserve(4);
  for (int i = 0; i < 4; ++i) queued.push_back(p.submit([i] { return i; }));
  EXPECT_EQ(bound_in_use(p), 4u);
  EXPECT_EQ(p.try_post([] {}), spool::errc::full);
  std::size_t dropped = 0;
  std::thread stopper([&] { dropped = p.shutdown(spool::shutdown_mode::discard); });
  // The worker is held, so only the shutdown's drain takes the tasks out; then the worker may
  // go, and the shutdown, which waits for it, returns.
  while (bound_in_use(p) != 0) std::this_thread::yield();
  release.open();
  stopper.join();
  EXPECT_EQ(dropped, 4u);
  EXPECT_EQ(bound_in_use(p), 0u);
  for (spool::future<int>& f : queued) {
    EXPECT_EQ(error_code_of([&] { (void)f.get(); }), spool::errc::cancelled);
  }
}

// post_n on a bounded pool submits one task per index, each meeting the bound: with the worker
// held and room for 3, reject takes 3 and refuses the rest of the batch.
TEST(BoundedSlots, BatchesMeetTheBoundTaskByTask) {
  spool::pool p{pool_config(1, 3, spool::full_policy::reject)};
  gate release;
  std::latch started{1};
  hold_workers(p, started, release);
  std::atomic<int> ran{0};
  const spool::bulk_result r = p.try_post_n(10, [&](std::size_t) { ++ran; });
  EXPECT_EQ(r.accepted, 3u);
  EXPECT_EQ(r.error, spool::errc::full);
  EXPECT_EQ(bound_in_use(p), 3u);
  release.open();
  p.wait_idle();
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(bound_in_use(p), 0u);
}
