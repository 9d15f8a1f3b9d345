// Tracing: tasks named with spool::named, and the task hooks (config::on_task_start,
// on_task_finish) that see every task start and finish on the thread that runs it.
#include <spool/spool.hpp>
#include <spool/task_group.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

using namespace std::chrono_literals;
using spool_test::get_elsewhere;
using spool_test::pool_config;

struct event {
  bool start;
  std::string name;  // "" for an unnamed task
  int worker;
  spool::task_end end;
  std::thread::id thread;
};

// Records every hook call, in order.
class trace_log {
 public:
  spool::config hooked(unsigned threads) {
    spool::config cfg = pool_config(threads);
    cfg.on_task_start = [this](const spool::task_info& t) {
      add({true, t.name != nullptr ? t.name : "", t.worker_index, spool::task_end::completed,
           std::this_thread::get_id()});
    };
    cfg.on_task_finish = [this](const spool::task_info& t, spool::task_end how) {
      add({false, t.name != nullptr ? t.name : "", t.worker_index, how,
           std::this_thread::get_id()});
    };
    return cfg;
  }
  std::vector<event> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  // The finish event of the task called `name`.
  const event* finish_of(const std::vector<event>& all, const std::string& name) {
    auto it = std::find_if(all.begin(), all.end(),
                           [&](const event& e) { return !e.start && e.name == name; });
    return it == all.end() ? nullptr : &*it;
  }

 private:
  void add(event e) {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  std::mutex mu_;
  std::vector<event> events_;
};

TEST(Tracing, EveryKindOfTaskReportsItsNameAndEnd) {
  trace_log log;
  {
    spool::pool p(log.hooked(2));
    get_elsewhere(p.submit(spool::named("submit", [] { return 1; })));
    p.post(spool::named("post", [] {}));
    get_elsewhere(p.submit([] { return 2; }).then(spool::named("then", [](int x) { return x; })));
    spool::task_group g(p);
    g.run(spool::named("group", [] {}));
    g.wait();
    get_elsewhere(p.submit_after(0ms, spool::named("submit_after", [] { return 3; })));
    (void)p.post_after(0ms, spool::named("post_after", [] {}));
    auto failing = p.submit(spool::named("throws", []() -> int { throw std::runtime_error("x"); }));
    EXPECT_THROW(failing.get(), std::runtime_error);
    std::stop_source stopped;
    stopped.request_stop();
    p.post(stopped.get_token(), spool::named("stopped", [] {}));
    p.wait_idle();
  }  // the destructor runs post_after's timer (due already) before it joins
  const std::vector<event> all = log.events();
  for (const char* name : {"submit", "post", "then", "group", "submit_after", "post_after"}) {
    const event* e = log.finish_of(all, name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->end, spool::task_end::completed) << name;
    EXPECT_GE(e->worker, 0) << name;
  }
  ASSERT_NE(log.finish_of(all, "throws"), nullptr);
  EXPECT_EQ(log.finish_of(all, "throws")->end, spool::task_end::failed);
  ASSERT_NE(log.finish_of(all, "stopped"), nullptr);
  EXPECT_EQ(log.finish_of(all, "stopped")->end, spool::task_end::cancelled);
  // Every start has its finish, on the same thread.
  std::size_t starts = 0;
  std::size_t finishes = 0;
  for (const event& e : all) (e.start ? starts : finishes)++;
  EXPECT_EQ(starts, finishes);
}

// A task that waits helps: the task it runs meanwhile starts and finishes inside it.
TEST(Tracing, HelpedTasksNestInsideTheWaitingOne) {
  trace_log log;
  {
    spool::pool p(log.hooked(1));
    auto parent = p.submit(spool::named(
        "parent", [&p] { return p.submit(spool::named("child", [] { return 1; })).get(); }));
    EXPECT_EQ(get_elsewhere(parent), 1);
    p.wait_idle();
  }
  std::vector<std::string> order;
  for (const event& e : log.events()) {
    if (!e.name.empty()) order.push_back((e.start ? "+" : "-") + e.name);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"+parent", "+child", "-child", "-parent"}));
}

// A task run by a thread outside the pool (its own task taken back) reports worker -1.
TEST(Tracing, OutsideRunsReportNoWorker) {
  trace_log log;
  {
    spool::pool p(log.hooked(1));
    EXPECT_EQ(p.submit(spool::named("mine", [] { return 5; })).get(), 5);
    p.wait_idle();
  }
  const std::vector<event> all = log.events();
  const event* e = log.finish_of(all, "mine");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->worker == -1 || e->worker == 0);  // taken back, or a worker got it first
  if (e->worker == -1) {
    EXPECT_EQ(e->thread, std::this_thread::get_id());
  }
}

TEST(Tracing, AThrowingHookIsReportedAndIgnored) {
  spool::config cfg = pool_config(1);
  cfg.on_task_start = [](const spool::task_info&) { throw std::runtime_error("hook"); };
  spool::pool p(cfg);
  testing::internal::CaptureStderr();
  EXPECT_EQ(get_elsewhere(p.submit([] { return 3; })), 3);
  p.wait_idle();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("on_task_start"), std::string::npos) << err;
}

// A named callable is checked and called as the callable itself.
TEST(Tracing, NamedCallablesBehaveAsTheirCallable) {
  spool::pool p(pool_config(1));
  EXPECT_EQ(p.submit(spool::named("add", [](int a, int b) { return a + b; }), 2, 3).get(), 5);
  EXPECT_EQ(spool_test::error_code_of(
                [&] { (void)p.submit(spool::named("null", static_cast<int (*)()>(nullptr))); }),
            spool::errc::invalid_argument);
  auto token =
      p.submit(spool::named("token", [](std::stop_token st) { return st.stop_possible(); }));
  EXPECT_TRUE(token.get());
  auto handled = p.submit([]() -> int {
                    throw std::logic_error("l");
                  }).then_error(spool::named("handler", [](const std::logic_error&) { return 1; }));
  EXPECT_EQ(handled.get(), 1);
}

}  // namespace
