// spool-deadlines: giving up in time.
//  - when_all_for: three replicas answer, one of them never does; the combined answer fails
//    with errc::timed_out after the deadline and the replicas not yet started are cancelled.
//  - when_any (variadic): the first of a cache lookup and a computation, of different types.
//  - shutdown_for: a drain that stops waiting at its deadline and says what it dropped.
//
//   spool-deadlines [--deadline MS]
#include <spool/spool.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <string>
#include <thread>
#include <tuple>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  long deadline_ms = 20;
  if (argc == 3 && std::strcmp(argv[1], "--deadline") == 0) deadline_ms = std::atol(argv[2]);
  if (deadline_ms <= 0) {
    std::fprintf(stderr, "usage: %s [--deadline MS]\n", argv[0]);
    return 2;
  }
  const auto deadline = std::chrono::milliseconds(deadline_ms);
  int status = 0;
  spool::pool pool{spool::config{.threads = 2, .name = "deadline"}};

  // A replica that never answers (a promise nobody sets) holds up the other two.
  spool::promise<int> silent(pool);
  auto all = spool::when_all_for(deadline, pool.submit([] { return 1; }),
                                 pool.submit([] { return 2; }), silent.get_future());
  try {
    (void)all.get();
    status = 1;
  } catch (const spool::error& e) {
    std::printf("replicas: %s after %ld ms; the silent one was cancelled: %s\n",
                e.code() == spool::errc::timed_out ? "timed out" : "failed", deadline_ms,
                silent.cancelled() ? "yes" : "no");
    status |= e.code() == spool::errc::timed_out && silent.cancelled() ? 0 : 1;
  }

  // The first of two differently typed answers; the other is still there to read.
  spool::promise<std::string> cache(pool);
  auto first = spool::when_any(cache.get_future(), pool.submit([] { return 6 * 7; })).get();
  std::printf("first answer: input %zu, value %d\n", first.index, std::get<1>(first.futures).get());
  status |= first.index == 1 ? 0 : 1;
  cache.set_value("late");

  // A drain with a deadline: a task that outlasts it keeps the queue waiting, so what is
  // queued behind it is dropped, and a timer due in an hour is dropped at once.
  std::latch running(2);  // both workers busy
  std::latch release(1);
  pool.post([&] {
    running.count_down();
    release.wait();
  });
  pool.post([&] {
    running.count_down();
    release.wait();
  });
  running.wait();
  for (int i = 0; i < 5; ++i) pool.post([] {});
  (void)pool.post_after(1h, [] {});
  std::thread opener([&] {
    while (pool.statistics().cancelled < 5) std::this_thread::yield();
    release.count_down();
  });
  const spool::shutdown_report r = pool.shutdown_for(deadline);
  opener.join();
  std::printf("shutdown: timed out %s, dropped %zu (of them timers %zu)\n",
              r.timed_out ? "yes" : "no", r.dropped, r.timers_dropped);
  status |= r.timed_out && r.dropped == 6 && r.timers_dropped == 1 ? 0 : 1;
  return status;
}
