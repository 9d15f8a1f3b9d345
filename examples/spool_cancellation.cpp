// spool-cancellation: cancelling work that has not started, and telling work that has.
//  - A search over shards that share a std::stop_source: the shard that finds the key requests
//    stop, which cancels the shards still queued (their futures report task_cancelled at once)
//    and tells any running one through its token.
//  - A then() chain cancelled at its end: the cancellation passes up the chain and drops every
//    link that has not started, the task at its head included.
//  - A coroutine started with the pool's stop token: the pool's shutdown ends its wait on a
//    promise nobody will set, and the coroutine sees spool::task_cancelled.
//
//   spool-cancellation
#include <spool/coro.hpp>
#include <spool/spool.hpp>

#include <atomic>
#include <cstdio>
#include <latch>
#include <optional>
#include <stop_token>
#include <vector>

namespace {

spool::task<int> wait_for_reply(spool::future<int> reply) {
  try {
    co_return co_await std::move(reply);
  } catch (const spool::task_cancelled&) {
    co_return -1;  // the pool shut down first
  }
}

}  // namespace

int main() {
  int status = 0;
  {
    // One worker: the shards start in the order they were submitted.
    spool::pool pool{spool::config{.threads = 1, .name = "cancel"}};

    std::stop_source search;
    std::atomic<int> searched{0};
    std::vector<spool::future<int>> shards;
    for (int i = 0; i < 8; ++i) {
      shards.push_back(pool.submit(search.get_token(), [i, &searched, &search] {
        ++searched;
        if (i != 3) return -1;
        search.request_stop();  // found: the rest need not run
        return i;
      }));
    }
    int found = -1;
    int cancelled = 0;
    for (auto& s : shards) {
      try {
        if (const int v = s.get(); v >= 0) found = v;
      } catch (const spool::task_cancelled&) {
        ++cancelled;
      }
    }
    std::printf("found in shard %d after searching %d shards; %d cancelled\n", found,
                searched.load(), cancelled);
    status |= found == 3 && searched.load() == 4 && cancelled == 4 ? 0 : 1;

    // The chain: the worker is busy, so no link has started when the end is cancelled.
    std::latch busy(1);
    std::latch release(1);
    pool.post([&] {
      busy.count_down();
      release.wait();
    });
    busy.wait();
    const auto before = pool.statistics().cancelled;
    auto page = pool.submit([] { return 7; }).then([](int id) { return id * 2; }).then([](int v) {
      return v + 1;
    });
    const bool stopped = page.cancel();
    release.count_down();
    pool.wait_idle();
    const auto dropped = pool.statistics().cancelled - before;
    std::printf("chain cancelled: %s; links dropped unrun: %llu\n", stopped ? "yes" : "no",
                static_cast<unsigned long long>(dropped));
    status |= stopped && dropped == 3 ? 0 : 1;
  }

  // The coroutine: its pool's shutdown (the destructor) ends the wait.
  std::optional<spool::promise<int>> never;
  spool::future<int> reply_seen;
  {
    spool::pool pool{spool::config{.threads = 1, .name = "cancel"}};
    never.emplace(pool);
    reply_seen = spool::start(pool, wait_for_reply(never->get_future()), pool.get_stop_token());
    pool.wait_idle();  // the coroutine is suspended on the promise
  }
  const int seen = reply_seen.get();
  std::printf("coroutine after the pool's shutdown: %d; the promise saw its future cancelled: %s\n",
              seen, never->cancelled() ? "yes" : "no");
  status |= seen == -1 && never->cancelled() ? 0 : 1;
  return status;
}
